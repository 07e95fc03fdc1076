"""`/v1/chat/completions` of our worker against vLLM's own server: the same requests, the same answers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair

STORY: list[Any] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me a story about a cat."},
]
HI: list[Any] = [{"role": "user", "content": "Hi"}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}

CASES: list[tuple[str, dict[str, Any]]] = [
    ("eos", {"messages": STORY, "max_tokens": 16}),
    (
        "text-parts",
        {
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Tell me"}, {"type": "text", "text": "a story"}],
                }
            ],
            "max_tokens": 8,
        },
    ),
    ("length", {"messages": HI, "max_tokens": 6}),
    ("max-completion-tokens", {"messages": HI, "max_completion_tokens": 5}),
    ("logprobs", {"messages": HI, "max_tokens": 6, "logprobs": True, "top_logprobs": 2}),
    ("logprobs-no-top", {"messages": HI, "max_tokens": 4, "logprobs": True}),
    (
        "choice",
        {"messages": HI, "max_tokens": 8, "extra_body": {"structured_outputs": {"choice": ["yes", "no"]}}},
    ),
    (
        "regex",
        {
            "messages": HI,
            "max_tokens": 8,
            "extra_body": {"structured_outputs": {"regex": "[a-c]{3}[0-9]{2}"}},
        },
    ),
    (
        "json-schema",
        {
            "messages": HI,
            "max_tokens": 16,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}},
        },
    ),
    (
        "continue-final-message",
        {
            "messages": [*HI, {"role": "assistant", "content": "Well"}],
            "max_tokens": 4,
            "extra_body": {"add_generation_prompt": False, "continue_final_message": True},
        },
    ),
]


async def both(pair: Pair, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same greedy chat completion from vLLM's server and ours, as JSON."""
    request: dict[str, Any] = {"model": "tiny", "temperature": 0, **kwargs}
    theirs = await pair.theirs.chat.completions.create(**request)
    ours = await pair.ours.chat.completions.create(**request)
    return theirs.to_dict(), ours.to_dict()


@pytest.mark.parametrize(("case", "kwargs"), CASES, ids=[c for c, _ in CASES])
async def test_chat(case: str, kwargs: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await both(pair, **kwargs)
    assert theirs["choices"][0]["message"]["content"]  # the case produces something to compare
    assert_same(theirs, ours)


@pytest.mark.parametrize("include", [False, True], ids=["stop-str-excluded", "stop-str-included"])
async def test_stop_string_from_the_output(include: bool, pair: Pair) -> None:
    theirs, _ = await both(pair, messages=STORY, max_tokens=16)
    text = theirs["choices"][0]["message"]["content"]
    stop = text[len(text) // 2 :][:3]
    assert stop.strip(), text
    theirs, ours = await both(
        pair, messages=STORY, max_tokens=16, stop=stop, extra_body={"include_stop_str_in_output": include}
    )
    assert theirs["choices"][0]["stop_reason"] == stop
    assert_same(theirs, ours)


async def test_streaming(pair: Pair) -> None:
    request: dict[str, Any] = {
        "model": "tiny",
        "messages": STORY,
        "temperature": 0,
        "max_tokens": 16,
        "logprobs": True,
        "top_logprobs": 1,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    theirs = [c.to_dict() async for c in await pair.theirs.chat.completions.create(**request)]
    ours = [c.to_dict() async for c in await pair.ours.chat.completions.create(**request)]
    assert summary(theirs)["content"]
    assert_same(summary(theirs), summary(ours))


def summary(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client makes of a chat stream: role, content, logprobs, finish and stop reason, usage."""
    out: dict[str, Any] = {"role": None, "content": "", "logprobs": [], "finish_reason": None}
    for chunk in chunks:
        for c in chunk["choices"]:
            delta = c["delta"]
            out["role"] = out["role"] or delta.get("role")
            out["content"] += delta.get("content") or ""
            out["logprobs"] += (c.get("logprobs") or {}).get("content") or []
            if c.get("finish_reason") is not None:
                out["finish_reason"], out["stop_reason"] = c["finish_reason"], c.get("stop_reason")
    out["final_usage"] = chunks[-1].get("usage")
    out["final_choices"] = chunks[-1]["choices"]
    return out


async def test_echo_reports_prompt_logprobs(pair: Pair) -> None:
    theirs, ours = await both(
        pair,
        messages=[*HI, {"role": "assistant", "content": "Well"}],
        max_tokens=4,
        extra_body={"echo": True, "add_generation_prompt": False, "continue_final_message": True},
    )
    assert theirs["prompt_logprobs"] is not None
    assert_same(theirs, ours)


async def test_no_tool_calls_is_left_out(pair: Pair) -> None:
    theirs, ours = await both(pair, messages=HI, max_tokens=4)
    assert "tool_calls" not in theirs["choices"][0]["message"]
    assert_same(theirs, ours)


async def test_prompt_tokens_details_only_with_the_flag(pair: Pair) -> None:
    # long enough to fill whole KV blocks, which the second request finds cached
    messages = [{"role": "user", "content": "Tell me about the cache, twice. " * 12}]
    await both(pair, messages=messages, max_tokens=2)
    theirs, ours = await both(pair, messages=messages, max_tokens=2)
    assert_same(theirs["usage"], ours["usage"])
