"""The routes over the session's real engine (greedy): outputs equal the text and chat layers'."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.support.http_serving import MODEL, Served
from vllm_llm import ChatMessage, ChatRequest, TextRequest, TextSamplingParams

MESSAGES: list[Any] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me a story about a cat."},
]


async def test_chat_equals_chat_layer(engine_server: Served) -> None:
    expected = await engine_server.state.chat().complete(
        ChatRequest(
            request_id="oracle-chat",
            messages=[ChatMessage(**m) for m in MESSAGES],
            params=TextSamplingParams(temperature=0.0, max_tokens=12),
        )
    )
    client = engine_server.client
    resp = await client.chat.completions.create(model=MODEL, messages=MESSAGES, temperature=0, max_tokens=12)
    assert resp.choices[0].message.content == expected.choices[0].content
    assert resp.choices[0].finish_reason == expected.choices[0].finish_reason
    assert resp.usage is not None
    assert resp.usage.completion_tokens == len(expected.choices[0].token_ids)
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        temperature=0,
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [c async for c in stream]
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == expected.choices[0].content
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == resp.usage.completion_tokens


async def test_completion_equals_text_layer(engine_server: Served) -> None:
    params = TextSamplingParams(temperature=0.0, max_tokens=10, logprobs=2)
    expected = await engine_server.state.text().complete(
        TextRequest(request_id="oracle-cmpl", prompt="The quick brown fox", params=params)
    )
    r = await engine_server.http.post(
        "/v1/completions",
        json={
            "model": MODEL,
            "prompt": "The quick brown fox",
            "temperature": 0,
            "max_tokens": 10,
            "logprobs": 2,
            "return_token_ids": True,
        },
    )
    choice = r.json()["choices"][0]
    (want,) = expected.choices
    assert choice["text"] == want.text
    assert choice["token_ids"] == want.token_ids
    assert want.logprobs is not None
    assert choice["logprobs"]["tokens"] == [p.token for p in want.logprobs]
    assert choice["logprobs"]["token_logprobs"] == pytest.approx([p.logprob for p in want.logprobs])
    stream = await engine_server.client.completions.create(
        model=MODEL, prompt="The quick brown fox", temperature=0, max_tokens=10, stream=True
    )
    assert "".join([c.choices[0].text async for c in stream]) == want.text


async def test_completion_n_and_stop(engine_server: Served) -> None:
    client = engine_server.client
    resp = await client.completions.create(
        model=MODEL, prompt=["Once upon", "a time"], n=2, temperature=1.0, seed=5, max_tokens=6
    )
    assert [c.index for c in resp.choices] == [0, 1, 2, 3]
    assert resp.usage is not None and 4 <= resp.usage.completion_tokens <= 24
    assert all(c.finish_reason in ("length", "stop") for c in resp.choices)
    greedy = await client.completions.create(model=MODEL, prompt="Once upon", temperature=0, max_tokens=16)
    full = greedy.choices[0].text
    stop = stop_string_in(full)
    stopped = await client.completions.create(
        model=MODEL, prompt="Once upon", temperature=0, max_tokens=16, stop=stop
    )
    assert stopped.choices[0].text == full[: full.index(stop)]
    assert stopped.choices[0].finish_reason == "stop"


def stop_string_in(text: str) -> str:
    """Two characters of `text` (not both whitespace) from its second half, else after its first character."""
    middle = len(text) // 2
    for at in [*range(middle, len(text) - 1), *range(1, middle)]:
        if text[at : at + 2].strip():
            return text[at : at + 2]
    raise AssertionError(f"no stop string can be taken from {text!r}")


@pytest.mark.parametrize("stream", [False, True])
async def test_generate_equals_text_layer(engine_server: Served, stream: bool) -> None:
    prompt = engine_server.state.text().encode("In the beginning")
    expected = await engine_server.state.text().complete(
        TextRequest(
            request_id=f"oracle-gen-{stream}",
            prompt=prompt,
            params=TextSamplingParams(temperature=0.0, max_tokens=8, logprobs=1),
        )
    )
    r = await engine_server.http.post(
        "/inference/v1/generate",
        json={
            "token_ids": prompt,
            "sampling_params": {"temperature": 0.0, "max_tokens": 8, "logprobs": 1},
            "stream": stream,
        },
    )
    assert r.status_code == 200, r.text
    if stream:
        frames = [f.removeprefix("data: ") for f in r.text.split("\n\n") if f]
        assert frames[-1] == "[DONE]"
        choices = [c for f in frames[:-1] for c in json.loads(f)["choices"]]
    else:
        choices = r.json()["choices"]
    assert [t for c in choices for t in c["token_ids"]] == expected.choices[0].token_ids
    positions = expected.choices[0].logprobs
    assert positions is not None
    got = [e["logprob"] for c in choices for e in c["logprobs"]["content"]]
    assert got == pytest.approx([p.logprob for p in positions])


async def test_engine_errors_and_tokenize(engine_server: Served) -> None:
    with pytest.raises(openai.BadRequestError) as too_long:
        await engine_server.client.completions.create(model=MODEL, prompt="story " * 600)
    assert "maximum context length" in too_long.value.response.json()["error"]["message"]
    r = await engine_server.http.post("/tokenize", json={"prompt": "hello there"})
    tokens = r.json()["tokens"]
    assert tokens == engine_server.state.text().encode("hello there")
    r = await engine_server.http.post("/detokenize", json={"tokens": tokens})
    assert r.json()["prompt"].endswith("hello there")


@pytest.mark.parametrize("route", ["chat", "completions"])
async def test_stream_interval_over_http(engine_server: Served, route: str) -> None:
    """vLLM's per-request `stream_interval`: the same tokens and text, in chunks of at least N tokens."""
    common: dict[str, Any] = {"model": MODEL, "temperature": 0, "max_tokens": 13}
    extra = {"ignore_eos": True, "return_token_ids": True}

    async def chunks(interval: int | None) -> list[tuple[list[int], str]]:
        body = dict(extra) | ({"stream_interval": interval} if interval is not None else {})
        if route == "chat":
            messages: Any = [{"role": "user", "content": "Tell me a story"}]
            stream: Any = await engine_server.client.chat.completions.create(
                messages=messages, stream=True, extra_body=body, **common
            )
            return [
                (c.choices[0].model_extra["token_ids"] or [], c.choices[0].delta.content or "")
                async for c in stream
                if c.choices and c.choices[0].model_extra.get("token_ids") is not None
            ]
        stream = await engine_server.client.completions.create(
            prompt="Once upon a time", stream=True, extra_body=body, **common
        )
        return [(c.choices[0].model_extra["token_ids"] or [], c.choices[0].text) async for c in stream]

    every, batched = await chunks(None), await chunks(4)
    assert [t for ids, _ in batched for t in ids] == [t for ids, _ in every for t in ids]
    assert "".join(text for _, text in batched) == "".join(text for _, text in every)
    sizes = [len(ids) for ids, _ in batched]
    assert sum(sizes) == 13
    assert all(n >= 4 for n in sizes[1:-1]), sizes
    assert len(sizes) < len(every), (sizes, [len(ids) for ids, _ in every])


async def test_a_bad_stream_interval_is_a_400(engine_server: Served) -> None:
    with pytest.raises(openai.BadRequestError) as bad:
        await engine_server.client.completions.create(
            model=MODEL, prompt="hi", max_tokens=3, extra_body={"stream_interval": 0}
        )
    error = bad.value.response.json()["error"]
    # vLLM's field is `Field(ge=1)`: pydantic's issue, at the body's location
    assert error["param"] == "body.stream_interval"
    assert "Input should be greater than or equal to 1" in error["message"]
