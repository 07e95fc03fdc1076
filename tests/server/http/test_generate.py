"""`POST /inference/v1/generate` (tokens in, tokens out) over a MockLlm, through httpx."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.http_serving import Served, serve
from vllm_llm import MockLlm, TextRequest, TextSamplingParams
from vllm_server.config import FrontendConfig, ServerConfig
from vllm_server.wiring import build_state

PROMPT = [1, 300, 301, 302]


def events(body: str) -> list[Any]:
    """The JSON payloads of an SSE body, checking it ends with [DONE]."""
    frames = [line.removeprefix("data: ") for line in body.split("\n\n") if line]
    assert frames[-1] == "[DONE]"
    return [json.loads(f) for f in frames[:-1]]


async def test_generate_tokens(mock_server: Served, mock_llm: MockLlm) -> None:
    r = await mock_server.http.post(
        "/inference/v1/generate",
        json={"request_id": "r1", "token_ids": PROMPT, "sampling_params": {"max_tokens": 5, "logprobs": 2}},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    expected = [mock_llm.token_at(PROMPT, i) for i in range(5)]
    assert body["request_id"] == "generate-tokens-r1"
    assert mock_llm.requests[-1].request_id == "generate-tokens-r1"
    (choice,) = body["choices"]
    assert choice["token_ids"] == expected
    assert choice["finish_reason"] == "length"
    content = choice["logprobs"]["content"]
    assert [c["token_id"] for c in content] == expected
    assert all(c["rank"] == 1 and len(c["top_logprobs"]) == 2 for c in content)
    assert body["usage"] == {"prompt_tokens": 4, "total_tokens": 9, "completion_tokens": 5}


async def test_generate_without_max_tokens_uses_the_room_left(mock_server: Served, mock_llm: MockLlm) -> None:
    r = await mock_server.http.post(
        "/inference/v1/generate", json={"token_ids": PROMPT, "sampling_params": {"ignore_eos": True}}
    )
    assert r.status_code == 200, r.text
    assert mock_llm.requests[-1].sampling_params.max_tokens == 512 - len(PROMPT)


async def test_generate_streaming(mock_server: Served, mock_llm: MockLlm) -> None:
    r = await mock_server.http.post(
        "/inference/v1/generate",
        json={
            "token_ids": PROMPT,
            "sampling_params": {"max_tokens": 4},
            "stream": True,
            "stream_options": {"include_usage": True},
            "return_token_ids": True,
        },
    )
    assert r.headers["content-type"].startswith("text/event-stream")
    *chunks, usage = events(r.text)
    assert [t for c in chunks for t in c["choices"][0]["token_ids"]] == [
        mock_llm.token_at(PROMPT, i) for i in range(4)
    ]
    assert chunks[0]["prompt_token_ids"] == PROMPT
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize("stream", [False, True])
async def test_generate_through_the_text_layer(mock_server: Served, stream: bool) -> None:
    """Stop strings and n > 1 need the text layer; token ids still match it exactly."""
    text = mock_server.state.text()
    full = await text.complete(
        TextRequest(request_id="o", prompt=PROMPT, params=TextSamplingParams(max_tokens=10))
    )
    stop = full.choices[0].text[3:6]
    params: dict[str, Any] = {"max_tokens": 10, "stop": stop, "n": 2, "temperature": 1.0, "seed": 1}
    expected = await text.complete(
        TextRequest(request_id="o2", prompt=PROMPT, params=TextSamplingParams(**{**params, "stop": [stop]}))
    )
    r = await mock_server.http.post(
        "/inference/v1/generate", json={"token_ids": PROMPT, "sampling_params": params, "stream": stream}
    )
    tokens: list[list[int]] = [[], []]
    finish = [None, None]
    for chunk in events(r.text) if stream else [r.json()]:
        for c in chunk["choices"]:
            tokens[c["index"]] += c["token_ids"]
            finish[c["index"]] = c["finish_reason"] or finish[c["index"]]
    assert tokens == [c.token_ids for c in expected.choices]
    assert finish == ["stop", "stop"]


async def test_generate_text_mode(mock_server: Served) -> None:
    r = await mock_server.http.post(
        "/inference/v1/generate",
        json={
            "token_ids": PROMPT,
            "sampling_params": {"max_tokens": 3, "logprobs": 1},
            "output_mode": "text",
        },
    )
    (choice,) = r.json()["choices"]
    expected = await mock_server.state.text().complete(
        TextRequest(request_id="o", prompt=PROMPT, params=TextSamplingParams(max_tokens=3, logprobs=1))
    )
    assert choice["text"] == expected.choices[0].text
    positions = expected.choices[0].logprobs
    assert positions is not None
    assert [c["token"] for c in choice["logprobs"]["content"]] == [p.token for p in positions]


async def test_generate_kv_transfer_params(mock_server: Served, mock_llm: MockLlm) -> None:
    kv = {"do_remote_prefill": False}
    r = await mock_server.http.post(
        "/inference/v1/generate",
        json={"token_ids": PROMPT, "sampling_params": {"max_tokens": 2}, "kv_transfer_params": kv},
    )
    assert r.json()["kv_transfer_params"] == kv
    assert mock_llm.requests[-1].kv_transfer_params == kv


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_generate_reports_cached_tokens_with_prompt_tokens_details(
    mock_llm: MockLlm, stream: bool
) -> None:
    """--enable-prompt-tokens-details: vLLM's ServingTokens reports the cached tokens alone, a whole
    response keeping the other counts as null, its streamed usage chunk leaving them out."""
    config = FrontendConfig(
        server=ServerConfig(served_model_name=("tiny",), enable_prompt_tokens_details=True)
    )
    state = build_state(config, mock_llm)
    state.attach_layers()
    state.update_readiness()
    body: dict[str, Any] = {"token_ids": PROMPT, "sampling_params": {"max_tokens": 2}}
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    async with serve(state) as served:
        r = await served.http.post("/inference/v1/generate", json=body)
    assert r.status_code == 200, r.text
    usage = events(r.text)[-1]["usage"] if stream else r.json()["usage"]
    expected = (
        {"cached_tokens": 0}
        if stream
        else {"cached_tokens": 0, "created_cache_tokens": None, "multimodal_tokens": None}
    )
    assert usage["prompt_tokens_details"] == expected
