"""`POST /v1/completions` over a MockLlm (and, for what reaches the engine core, the session engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.support.engine_recorder import EngineRecorder
from tests.support.http_serving import MODEL, Served, serve, server_state
from vllm_llm import MockLlm, TextRequest, TextResult, TextSamplingParams
from vllm_llm.wire import LlmInfo, LoraRequest, StructuredOutputs
from vllm_server.config import LoraModule


async def oracle(served: Served, prompt: str | list[int], **params: Any) -> TextResult:
    """What the text layer itself produces for the same request (the mock is deterministic)."""
    request = TextRequest(request_id="oracle", prompt=prompt, params=TextSamplingParams(**params))
    return await served.state.text().complete(request)


async def test_completion_text_tokens_and_usage(mock_server: Served, mock_llm: MockLlm) -> None:
    resp = await mock_server.client.completions.create(model=MODEL, prompt="hello world", max_tokens=5)
    expected = await oracle(mock_server, "hello world", max_tokens=5)
    prompt_ids = mock_server.state.text().encode("hello world")
    assert expected.choices[0].token_ids == [mock_llm.token_at(prompt_ids, i) for i in range(5)]
    assert resp.id.startswith("cmpl-")
    assert resp.object == "text_completion"
    assert resp.model == MODEL
    assert [c.text for c in resp.choices] == [expected.choices[0].text]
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (len(prompt_ids), 5)
    assert resp.usage.total_tokens == len(prompt_ids) + 5


async def test_max_tokens_defaults_to_16(mock_server: Served, mock_llm: MockLlm) -> None:
    resp = await mock_server.client.completions.create(model=MODEL, prompt="hello")
    assert resp.usage is not None and resp.usage.completion_tokens == 16
    assert mock_llm.requests[-1].sampling_params.max_tokens == 16


async def test_streaming_matches_whole_and_reports_usage(mock_server: Served) -> None:
    whole = await mock_server.client.completions.create(model=MODEL, prompt="hello world", max_tokens=8)
    stream = await mock_server.client.completions.create(
        model=MODEL, prompt="hello world", max_tokens=8, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    assert {c.id for c in chunks} == {chunks[0].id}
    assert chunks[0].id.startswith("cmpl-")
    *deltas, last = chunks
    assert "".join(c.choices[0].text for c in deltas) == whole.choices[0].text
    assert deltas[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in deltas)
    assert last.choices == []
    assert last.usage is not None and last.usage.completion_tokens == 8
    assert last.usage.prompt_tokens == whole.usage.prompt_tokens  # type: ignore[union-attr]


async def test_continuous_usage_stats(mock_server: Served) -> None:
    stream = await mock_server.client.completions.create(
        model=MODEL,
        prompt="hello",
        max_tokens=4,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    )
    chunks = [chunk async for chunk in stream]
    counts = [c.usage.completion_tokens for c in chunks if c.usage is not None]
    assert counts == sorted(counts) and counts[-1] == 4
    assert all(c.usage is not None for c in chunks)


async def test_n_and_several_prompts_index_choices(mock_server: Served, mock_llm: MockLlm) -> None:
    prompts = ["hello world", "good morning"]
    resp = await mock_server.client.completions.create(
        model=MODEL, prompt=prompts, max_tokens=3, n=2, temperature=1.0, seed=7
    )
    assert [c.index for c in resp.choices] == [0, 1, 2, 3]
    for p, prompt in enumerate(prompts):
        expected = await oracle(mock_server, prompt, max_tokens=3, n=2, temperature=1.0, seed=7)
        assert [c.text for c in resp.choices[2 * p : 2 * p + 2]] == [c.text for c in expected.choices]
    ids = {r.request_id for r in mock_llm.requests[-8:-4]}
    assert ids == {f"{i}_{resp.id}-{p}" for i in range(2) for p in range(2)}
    seeds = sorted(
        r.sampling_params.seed for r in mock_llm.requests[-8:-4] if r.sampling_params.seed is not None
    )
    assert seeds == [7, 7, 8, 8]
    assert resp.usage is not None and resp.usage.completion_tokens == 12


@pytest.mark.parametrize("prompt", [[1, 300, 301, 302], [[1, 300], [1, 301, 302]]])
async def test_token_prompts(mock_server: Served, mock_llm: MockLlm, prompt: list[Any]) -> None:
    resp = await mock_server.client.completions.create(model=MODEL, prompt=prompt, max_tokens=2)
    token_prompts = prompt if isinstance(prompt[0], list) else [prompt]
    assert len(resp.choices) == len(token_prompts)
    for choice, ids in zip(resp.choices, token_prompts, strict=True):
        assert choice.text == (await oracle(mock_server, ids, max_tokens=2)).choices[0].text
    assert [r.prompt_token_ids for r in mock_llm.requests[-len(token_prompts) :]] == token_prompts


async def test_stop_string_ends_the_choice(mock_server: Served) -> None:
    full = (await oracle(mock_server, "hello world", max_tokens=12)).choices[0].text
    stop = full[6:9]
    resp = await mock_server.client.completions.create(
        model=MODEL, prompt="hello world", max_tokens=12, stop=stop
    )
    choice = resp.choices[0]
    assert choice.text == full[: full.index(stop)]
    assert choice.finish_reason == "stop"
    assert choice.model_extra is not None and choice.model_extra["stop_reason"] == stop
    stream = await mock_server.client.completions.create(
        model=MODEL, prompt="hello world", max_tokens=12, stop=[stop, "never"], stream=True
    )
    assert "".join([c.choices[0].text async for c in stream]) == choice.text


async def test_stop_token_ids(mock_server: Served, mock_llm: MockLlm) -> None:
    prompt_ids = mock_server.state.text().encode("hello")
    stop_id = mock_llm.token_at(prompt_ids, 2)
    resp = await mock_server.client.completions.create(
        model=MODEL, prompt="hello", max_tokens=10, extra_body={"stop_token_ids": [stop_id]}
    )
    assert resp.choices[0].finish_reason == "stop"
    assert resp.choices[0].model_extra is not None and resp.choices[0].model_extra["stop_reason"] == stop_id
    assert resp.usage is not None and resp.usage.completion_tokens == 3


async def test_logprobs(mock_server: Served) -> None:
    resp = await mock_server.client.completions.create(
        model=MODEL, prompt="hello world", max_tokens=4, logprobs=2
    )
    expected = await oracle(mock_server, "hello world", max_tokens=4, logprobs=2)
    positions = expected.choices[0].logprobs
    assert positions is not None
    logprobs = resp.choices[0].logprobs
    assert logprobs is not None
    assert logprobs.tokens == [p.token for p in positions]
    assert logprobs.token_logprobs == [p.logprob for p in positions]
    assert logprobs.top_logprobs == [{c.token: c.logprob for c in p.candidates[:3]} for p in positions]
    offsets = [0]
    for token in logprobs.tokens[:-1]:
        offsets.append(offsets[-1] + len(token))
    assert logprobs.text_offset == offsets
    stream = await mock_server.client.completions.create(
        model=MODEL, prompt="hello world", max_tokens=4, logprobs=2, stream=True
    )
    streamed = [c.choices[0].logprobs async for c in stream]
    assert [t for lp in streamed if lp for t in lp.tokens or []] == logprobs.tokens
    assert [o for lp in streamed if lp for o in lp.text_offset or []] == offsets


async def test_echo_prepends_the_prompt(mock_server: Served) -> None:
    resp = await mock_server.client.completions.create(
        model=MODEL, prompt="hello world", max_tokens=3, echo=True, logprobs=1
    )
    expected = await oracle(mock_server, "hello world", max_tokens=3)
    assert resp.choices[0].text == "hello world" + expected.choices[0].text
    prompt_ids = mock_server.state.text().encode("hello world")
    logprobs = resp.choices[0].logprobs
    assert logprobs is not None and logprobs.token_logprobs is not None
    assert len(logprobs.token_logprobs) == len(prompt_ids) + 3
    assert logprobs.token_logprobs[0] is None  # the first prompt token has no logprob
    only = await mock_server.client.completions.create(
        model=MODEL, prompt="hello world", max_tokens=0, echo=True
    )
    assert only.choices[0].text == "hello world"


SAMPLING_BODY: dict[str, Any] = {
    "model": MODEL,
    "prompt": "hello",
    "max_tokens": 5,
    "temperature": 0.5,
    "top_p": 0.9,
    "top_k": 7,
    "min_p": 0.1,
    "presence_penalty": 0.5,
    "frequency_penalty": 0.25,
    "repetition_penalty": 1.1,
    "seed": 3,
    "min_tokens": 2,
    "ignore_eos": True,
    "logit_bias": {"300": 5.0},
    "bad_words": ["hello", "world"],
    "user": "someone",
    "response_format": {"type": "json_object"},
}


def vllm_bad_words(model_dir: Path, words: list[str]) -> list[list[int]]:
    """The bad-words token ids vLLM itself derives for `words` (the oracle)."""
    from vllm import SamplingParams as VllmSamplingParams
    from vllm.tokenizers import get_tokenizer

    params = VllmSamplingParams(bad_words=words)
    params.update_from_tokenizer(get_tokenizer(str(model_dir)))
    assert params._bad_words_token_ids is not None
    return params._bad_words_token_ids


def assert_body_params(sp: Any) -> None:
    """`sp` (ours or vLLM's SamplingParams) carries every parameter of `SAMPLING_BODY`."""
    assert (sp.temperature, sp.top_p, sp.top_k, sp.min_p) == (0.5, 0.9, 7, 0.1)
    assert (sp.presence_penalty, sp.frequency_penalty, sp.repetition_penalty) == (0.5, 0.25, 1.1)
    assert (sp.seed, sp.min_tokens, sp.ignore_eos, sp.max_tokens) == (3, 2, True, 5)
    assert sp.logit_bias == {300: 5.0}


async def test_body_parameters_are_lowered_into_the_llm_request(
    mock_server: Served, mock_llm: MockLlm, tiny_model_dir: Path
) -> None:
    r = await mock_server.http.post("/v1/completions", json=SAMPLING_BODY)
    assert r.status_code == 200, r.text
    sp = mock_llm.requests[-1].sampling_params
    assert_body_params(sp)
    assert sp.bad_words_token_ids == vllm_bad_words(tiny_model_dir, ["hello", "world"])
    assert sp.structured_outputs == StructuredOutputs(json_object=True)


async def test_sampling_params_reach_the_engine_core(
    engine_server: Served, engine_recorder: EngineRecorder, tiny_model_dir: Path
) -> None:
    # Observed inside the engine-core process (tests.support.engine_recorder), after the ZMQ hop.
    r = await engine_server.http.post(
        "/v1/completions", json=SAMPLING_BODY, headers={"X-Request-Id": "params-reach-engine"}
    )
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["completion_tokens"] == 5
    sp = engine_recorder.received_one("cmpl-params-reach-engine-0").sampling_params
    assert_body_params(sp)
    assert sp._bad_words_token_ids == vllm_bad_words(tiny_model_dir, ["hello", "world"])
    assert sp.structured_outputs.json_object is True


@pytest.mark.parametrize(
    ("extra", "field", "value"),
    [
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "object"}},
                }
            },
            "json",
            {"type": "object"},
        ),
        ({"structured_outputs": {"regex": "[a-z]+"}}, "regex", "[a-z]+"),
        ({"structured_outputs": {"choice": ["yes", "no"]}}, "choice", ["yes", "no"]),
    ],
)
async def test_structured_outputs(
    mock_server: Served, mock_llm: MockLlm, extra: dict[str, Any], field: str, value: Any
) -> None:
    r = await mock_server.http.post("/v1/completions", json={"prompt": "hello", "max_tokens": 2, **extra})
    assert r.status_code == 200, r.text
    so = mock_llm.requests[-1].sampling_params.structured_outputs
    assert so is not None and getattr(so, field) == value


async def test_vllm_extras_pass_through(mock_server: Served, mock_llm: MockLlm) -> None:
    kv = {"do_remote_decode": True, "remote_host": "h"}
    r = await mock_server.http.post(
        "/v1/completions",
        json={"prompt": "hello", "max_tokens": 2, "kv_transfer_params": kv, "return_token_ids": True},
        headers={"X-Request-Id": "abc"},
    )
    body = r.json()
    assert body["id"] == "cmpl-abc"
    assert body["kv_transfer_params"] == kv
    assert mock_llm.requests[-1].kv_transfer_params == kv
    choice = body["choices"][0]
    assert choice["prompt_token_ids"] == mock_llm.requests[-1].prompt_token_ids
    assert len(choice["token_ids"]) == 2


async def test_lora_module_as_model(tiny_info: LlmInfo) -> None:
    llm = MockLlm(info=msgspec.structs.replace(tiny_info, supports_lora=True, max_loras=1))
    state = server_state(llm)
    state.lora_modules["adapter"] = (LoraModule(name="adapter", path="/adapters/a"), 3)
    try:
        async with serve(state) as served:
            resp = await served.client.completions.create(model="adapter", prompt="hello", max_tokens=2)
            assert resp.model == "adapter"
            assert llm.requests[-1].lora_request == LoraRequest("adapter", 3, "/adapters/a")
            base = await served.client.completions.create(model=MODEL, prompt="hello", max_tokens=2)
            assert base.model == MODEL and llm.requests[-1].lora_request is None
    finally:
        await llm.shutdown()


async def test_metrics_are_recorded(mock_server: Served) -> None:
    await mock_server.client.completions.create(model=MODEL, prompt="hello", max_tokens=3)
    stream = await mock_server.client.completions.create(
        model=MODEL, prompt="hello", max_tokens=3, stream=True
    )
    [c async for c in stream]
    metrics = mock_server.state.metrics
    assert metrics.in_flight == 0
    text = metrics.render().decode()
    assert 'vllm:generation_tokens_total{engine="frontend",model_name="tiny"} 6.0' in text
    success = 'vllm:request_success_total{engine="frontend",finished_reason="length",model_name="tiny"} 2.0'
    assert success in text
