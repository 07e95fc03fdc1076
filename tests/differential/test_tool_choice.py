"""Tool choices on the real engine: our worker against vLLM's own server, both started with
`--enable-auto-tool-choice --tool-call-parser hermes` on the tiny model (whose tokenizer has the hermes
tokens). A forced choice constrains the output (hermes: vLLM 0.32's structural tag of the allowed calls), so
even a random-weight model answers with valid calls; greedy decoding under the same constraint gives the
same calls on both servers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair

MESSAGES: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"unit": {"enum": ["celsius", "fahrenheit"]}, "rain": {"type": "boolean"}},
            "required": ["unit", "rain"],
            "additionalProperties": False,
        },
    },
}
TIME: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_time",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"zone": {"enum": ["utc", "local"]}},
            "required": ["zone"],
            "additionalProperties": False,
        },
    },
}
NAMED = {"type": "function", "function": {"name": "get_weather"}}


def _valid(call: dict[str, Any]) -> None:
    arguments = json.loads(call["function"]["arguments"])
    if call["function"]["name"] == "get_weather":
        assert set(arguments) == {"unit", "rain"}, arguments
        assert arguments["unit"] in ("celsius", "fahrenheit") and isinstance(arguments["rain"], bool)
    else:
        assert call["function"]["name"] == "get_time" and arguments["zone"] in ("utc", "local"), call


@pytest.mark.parametrize(
    ("case", "tool_choice"), [("required", "required"), ("named", NAMED)], ids=["required", "named"]
)
async def test_forced_tool_choice_gives_valid_calls_equal_to_vllms(
    case: str, tool_choice: Any, pair: Pair
) -> None:
    request: dict[str, Any] = {
        "model": "tiny",
        "messages": MESSAGES,
        "tools": [WEATHER, TIME],
        "tool_choice": tool_choice,
        "temperature": 0,
        "max_tokens": 120,
    }
    theirs = (await pair.theirs.chat.completions.create(**request)).to_dict()
    ours = (await pair.ours.chat.completions.create(**request)).to_dict()
    calls = theirs["choices"][0]["message"].get("tool_calls") or []
    assert calls, theirs  # vLLM produced calls to compare with
    for call in calls + (ours["choices"][0]["message"].get("tool_calls") or []):
        _valid(call)
    if case == "named":
        assert [c["function"]["name"] for c in calls] == ["get_weather"]
    assert_same(theirs, ours, ignore=frozenset({"id"}))


async def test_forced_tool_choice_streamed_equals_vllms(pair: Pair) -> None:
    request: dict[str, Any] = {
        "model": "tiny",
        "messages": MESSAGES,
        "tools": [WEATHER, TIME],
        "tool_choice": "required",
        "temperature": 0,
        "max_tokens": 120,
        "stream": True,
    }
    theirs = _assembled([c.to_dict() async for c in await pair.theirs.chat.completions.create(**request)])
    ours = _assembled([c.to_dict() async for c in await pair.ours.chat.completions.create(**request)])
    assert theirs["calls"], theirs
    assert_same(theirs, ours)


def _assembled(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    calls: dict[int, dict[str, Any]] = {}
    out: dict[str, Any] = {"content": "", "finish_reason": None}
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            out["content"] += delta.get("content") or ""
            for call in delta.get("tool_calls") or []:
                entry = calls.setdefault(call["index"], {"name": "", "arguments": ""})
                function = call.get("function") or {}
                entry["name"] += function.get("name") or ""
                entry["arguments"] += function.get("arguments") or ""
            out["finish_reason"] = choice.get("finish_reason") or out["finish_reason"]
    out["calls"] = [calls[i] for i in sorted(calls)]
    return out


async def test_tools_reach_the_template_as_vllm_hands_them_over(pair: Pair) -> None:
    """vLLM normalizes tools before the template sees them (null description and parameters, strict only
    when given, unknown fields dropped): the tiny template prints them, so the prompts must be equal."""
    tools = [
        WEATHER,
        {"type": "function", "function": {"name": "ping", "x-vendor": 1}},
        {"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}},
    ]
    body = {"model": "tiny", "messages": MESSAGES, "tools": tools}
    theirs = await pair.theirs_http.post("/tokenize", json=body)
    ours = await pair.ours_http.post("/tokenize", json=body)
    assert theirs.status_code == 200, theirs.text
    assert ours.json()["tokens"] == theirs.json()["tokens"]
