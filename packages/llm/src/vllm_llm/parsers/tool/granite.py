"""Granite tool calls (`--tool-call-parser granite`, vLLM's GraniteEngineToolParser over its GraniteParser
engine).

Granite 3.0/3.1 write a JSON array of calls after a marker, with no closing marker:

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": ...}]   (3.0)
    <tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]                     (3.1)

Each array element is one call: its name is the first `"name": "..."` in it, its arguments the `arguments`
object (streamed as it grows, values corrected to the tool's schema). The array's `]` ends the calls; text
around them is content. A marker not followed by `[` is dropped and the rest is content. Special tokens the
format does not use are dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vllm_llm.parsers.tool._mistral_calls import CallAssembler, MarkupToolParser
from vllm_llm.parsers.tool._mistral_engine import Grammar, MarkupEngine, Move, State
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["GraniteToolParser"]

TOOL_TOKEN = "<|tool_call|>"
TOOL_STRING = "<tool_call>"

_GRAMMAR = Grammar(
    terminals={"TOOL_TOKEN": TOOL_TOKEN, "TOOL_STRING": TOOL_STRING},
    moves={
        (State.CONTENT, "TOOL_TOKEN"): Move(State.TOOL_ARGS),
        (State.CONTENT, "TOOL_STRING"): Move(State.TOOL_ARGS),
    },
    by_token=frozenset({"TOOL_TOKEN"}),
    array_body=True,
)
_JSON_WS = " \t\r\n"


def _object_end(raw: str, start: int) -> int | None:
    """The end (exclusive) of the JSON object opening at `raw[start]`, or None while unterminated."""
    depth = 0
    in_string = escape = False
    for i in range(start, len(raw)):
        ch = raw[i]
        if escape:
            escape = False
        elif in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def member_object(raw: str, key: str) -> str | None:
    """The verbatim text of the top-level member `key` of a (possibly unfinished) JSON object: its object
    value, or the part of it written so far; None before the value starts. ValueError when the value is not an
    object. (Verbatim, so it only grows as the text grows.)"""
    depth = 0
    in_string = escape = False
    string_start = -1
    last_string: str | None = None
    for i, ch in enumerate(raw):
        if escape:
            escape = False
        elif in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
                if depth == 1:
                    last_string = raw[string_start + 1 : i]
        elif ch == '"':
            in_string = True
            string_start = i
        elif ch == ":" and depth == 1 and last_string == key:
            start = i + 1
            while start < len(raw) and raw[start] in _JSON_WS:
                start += 1
            if start >= len(raw):
                return None
            if raw[start] != "{":
                raise ValueError(f"member {key!r} must be a JSON object")
            end = _object_end(raw, start)
            return raw[start:] if end is None else raw[start:end]
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return None


class _GraniteCalls(CallAssembler):
    """Calls whose body is `{"name": ..., "arguments": {...}}`: arguments carved out of it."""

    converts = True

    def convert(self, body: str, partial: bool) -> str:
        span = member_object(body, "arguments")
        if span is None:
            return "" if partial else "{}"
        return span


class GraniteToolParser(MarkupToolParser):
    """`<|tool_call|>[{...}, ...]` or `<tool_call>[{...}, ...]` calls."""

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._engine = MarkupEngine(_GRAMMAR, tokenizer, skip_reasoning=True)
        self._calls = _GraniteCalls(self.tools)
