"""Anthropic's `/v1/messages` and `/v1/messages/count_tokens` of our worker against vLLM's own server:
the same greedy requests give the same messages, the same stream events and usage, the same counts."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair

HI: list[Any] = [{"role": "user", "content": "Hi"}]
STORY: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "Tell me a story"}]}]
TOOLS: list[Any] = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]
ROUND_TRIP: list[Any] = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "21 C"}]},
]

CASES: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"messages": HI, "max_tokens": 16}),
    ("system-and-blocks", {"system": "You are a poet.", "messages": STORY, "max_tokens": 12}),
    ("system-blocks", {"system": [{"type": "text", "text": "Be brief."}], "messages": HI, "max_tokens": 8}),
    ("length", {"messages": HI, "max_tokens": 3}),
    ("tools", {"messages": [{"role": "user", "content": "Weather?"}], "tools": TOOLS, "max_tokens": 16}),
    ("tool-round-trip", {"messages": ROUND_TRIP, "tools": TOOLS, "max_tokens": 12}),
    ("tool-choice-none", {"messages": HI, "tools": TOOLS, "tool_choice": {"type": "none"}, "max_tokens": 8}),
    ("thinking-disabled", {"messages": HI, "thinking": {"type": "disabled"}, "max_tokens": 8}),
    (
        "inline-system",
        {"messages": [*HI, {"role": "system", "content": "Answer in French."}], "max_tokens": 8},
    ),
    (
        "json-output",
        {
            "messages": HI,
            "max_tokens": 16,
            "output_config": {
                "format": {
                    "type": "json_schema",
                    "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                }
            },
        },
    ),
]

#: What differs by construction: the message id, and the random signature of a thinking block.
VOLATILE = frozenset({"id", "signature"})


def _request(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {"model": "tiny", "temperature": 0, **kwargs}


async def _both(pair: Pair, path: str, body: dict[str, Any]) -> tuple[Any, Any]:
    theirs = await pair.theirs_http.post(path, json=body)
    ours = await pair.ours_http.post(path, json=body)
    assert ours.status_code == theirs.status_code == 200, (theirs.text, ours.text)
    return theirs.json(), ours.json()


@pytest.mark.parametrize(("case", "kwargs"), CASES, ids=[c for c, _ in CASES])
async def test_message(case: str, kwargs: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await _both(pair, "/v1/messages", _request(kwargs))
    assert theirs["content"] and theirs["usage"]["output_tokens"] > 0
    assert_same(theirs, ours, ignore=VOLATILE)


async def _events(http: Any, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with http.stream("POST", "/v1/messages", json={**body, "stream": True}) as response:
        assert response.status_code == 200
        text = "".join([chunk async for chunk in response.aiter_text()])
    events = []
    for frame in filter(None, text.split("\n\n")):
        event, data = frame.split("\n")
        payload = json.loads(data.removeprefix("data: "))
        assert event == f"event: {payload['type']}"
        events.append(payload)
    return events


def _shape(events: list[dict[str, Any]]) -> list[str]:
    """The event types, a delta named by its own type, a run of deltas of one type as one.

    How many deltas carry a block's text is timing: vLLM's output handler merges a request's outputs
    that queued up while its API server was busy (a loaded machine), and so may ours.
    """
    shape: list[str] = []
    for e in events:
        kind = e["delta"]["type"] if e["type"] == "content_block_delta" else e["type"]
        if not (e["type"] == "content_block_delta" and shape and shape[-1] == kind):
            shape.append(kind)
    return shape


def _structural(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] != "content_block_delta"]


def _text(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"].get("text", "") for e in events if e["type"] == "content_block_delta")


@pytest.mark.parametrize(("case", "kwargs"), CASES, ids=[c for c, _ in CASES])
async def test_stream(case: str, kwargs: dict[str, Any], pair: Pair) -> None:
    body = _request(kwargs)
    theirs = await _events(pair.theirs_http, body)
    ours = await _events(pair.ours_http, body)
    assert _shape(ours) == _shape(theirs)
    assert _text(ours) == _text(theirs) and _text(theirs)
    # message_start, block starts and stops, message_delta (stop reason and usage), message_stop: equal
    for t, o in zip(_structural(theirs), _structural(ours), strict=True):
        assert_same(t, o, ignore=VOLATILE)


async def test_stream_through_the_official_client(pair: Pair) -> None:
    """The official client assembles the same final message from both streams."""
    finals = []
    for server in (pair.theirs_http, pair.ours_http):
        client = anthropic.AsyncAnthropic(base_url=str(server.base_url), api_key="unused", max_retries=0)
        async with client.messages.stream(
            model="tiny", max_tokens=12, messages=HI, stop_sequences=["e"], extra_body={"temperature": 0}
        ) as stream:
            finals.append((await stream.get_final_message()).to_dict())
        await client.close()
    theirs, ours = finals
    assert theirs["content"]
    assert_same(theirs, ours, ignore=VOLATILE)


COUNTS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {"messages": HI}),
    ("system", {"system": "You are a poet.", "messages": STORY}),
    ("tools", {"messages": HI, "tools": TOOLS}),
    ("tool-round-trip", {"messages": ROUND_TRIP, "tools": TOOLS}),
]


@pytest.mark.parametrize(("case", "kwargs"), COUNTS, ids=[c for c, _ in COUNTS])
async def test_count_tokens(case: str, kwargs: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await _both(pair, "/v1/messages/count_tokens", {"model": "tiny", **kwargs})
    assert theirs["input_tokens"] > 0
    assert ours == theirs


async def test_count_tokens_equals_the_usage_of_the_message(pair: Pair) -> None:
    counted = await pair.ours_http.post("/v1/messages/count_tokens", json={"model": "tiny", "messages": HI})
    message = await pair.ours_http.post("/v1/messages", json=_request({"messages": HI, "max_tokens": 2}))
    assert counted.json()["input_tokens"] == message.json()["usage"]["input_tokens"]


BAD: list[tuple[str, dict[str, Any]]] = [
    ("missing-max-tokens", {"model": "tiny", "messages": HI}),
    (
        "unknown-block",
        {"model": "tiny", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "x"}]}]},
    ),
    (
        "bad-text",
        {
            "model": "tiny",
            "max_tokens": 4,
            "messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}],
        },
    ),
    (
        "server-tool",
        {
            "model": "tiny",
            "max_tokens": 4,
            "messages": HI,
            "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        },
    ),
    ("unknown-model", {"model": "nope", "max_tokens": 4, "messages": HI}),
    ("zero-max-tokens", {"model": "tiny", "max_tokens": 0, "messages": HI}),
]


@pytest.mark.parametrize(("case", "body"), BAD, ids=[c for c, _ in BAD])
async def test_bad_input_gets_the_same_status(case: str, body: dict[str, Any], pair: Pair) -> None:
    """The status vLLM answers, with Anthropic's error body (vLLM's own body is OpenAI's for errors its
    request model finds before the handler, Anthropic's after)."""
    theirs = await pair.theirs_http.post("/v1/messages", json=body)
    ours = await pair.ours_http.post("/v1/messages", json=body)
    assert 400 <= theirs.status_code < 500
    assert ours.status_code == theirs.status_code, (theirs.text, ours.text)
    error = ours.json()
    assert error["type"] == "error" and set(error["error"]) == {"type", "message"}
    vllm_error = theirs.json()
    if vllm_error.get("type") == "error":  # vLLM's handler answered: the same error type
        assert error["error"]["type"] == vllm_error["error"]["type"]
