"""Llama 3.x / 4 JSON tool calls (`--tool-call-parser llama3_json`, alias `llama4_json`; vLLM's
Llama3JsonToolParser, for vLLM's tool_chat_template_llama.jinja).

Calls are bare JSON objects, `parameters` (or `arguments`) holding the arguments, optionally after
`<|python_tag|>`, several separated by `; `:

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", ...}

Whole: every top-level `{...}` anywhere in the output is a call and the content is dropped; one object that
is not JSON or lacks `name`/`parameters` makes the whole output content. Streamed: only an output that
starts with `<|python_tag|>` or `{` is read as calls (anything else is content), re-parsed as partial JSON
at every step as vLLM does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from vllm_llm.parsers._base import (
    ExtractedToolCalls,
    MessageDelta,
    ParsedCall,
    ToolCallDelta,
    ToolParser,
    random_tool_call_id,
)
from vllm_llm.parsers.tool._json_family import (
    PartialJsonError,
    SkipStep,
    common_prefix,
    dumps,
    field,
    flush_finished_call,
    is_complete_json,
    loads_partial_prefix,
    name_delta,
    remaining_arguments,
)
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["Llama3JsonToolParser"]

_BOT = "<|python_tag|>"
_SEPARATOR = "; "


class Llama3JsonToolParser(ToolParser):
    """`{"name": ..., "parameters": {...}}` objects, `; `-separated, optionally after `<|python_tag|>`."""

    supports_required_and_named: ClassVar[bool] = False  # vLLM: a structural-tag model under strict tools
    structural_tag_model: ClassVar[str | None] = "llama"

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._text = ""
        self._calls: list[Any] = []
        """The calls as last parsed (vLLM's prev_tool_call_arr; not updated on the step a call starts)."""
        self._current = -1
        self._name_sent = False
        self._streamed: list[str] = []

    # ---- whole ----------------------------------------------------------------------------------------

    def extract(self, text: str) -> ExtractedToolCalls:
        if _BOT not in text and "{" not in text:
            return ExtractedToolCalls(called=False, content=text)
        decoder = json.JSONDecoder()
        calls: list[ParsedCall] = []
        end = -1
        start = text.find("{")
        while start >= 0:
            if start > end:  # a brace inside the last object (or right after it) is skipped
                try:
                    call, size = decoder.raw_decode(text[start:])
                    end = start + size
                    name = call["name"]
                    arguments = call["arguments"] if "arguments" in call else call["parameters"]
                except (ValueError, LookupError):
                    return ExtractedToolCalls(called=False, content=text)
                if not isinstance(name, str):
                    return ExtractedToolCalls(called=False, content=text)
                calls.append(ParsedCall(name=name, arguments=dumps(arguments), id=random_tool_call_id()))
            start = text.find("{", start + 1)
        if not calls:
            return ExtractedToolCalls(called=False, content=text)
        return ExtractedToolCalls(called=True, calls=calls)

    # ---- streamed -------------------------------------------------------------------------------------

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        self._text += delta_text
        if not self._text.startswith((_BOT, "{")):
            return MessageDelta(content=delta_text)
        try:
            return self._step()
        except (SkipStep, PartialJsonError, LookupError, TypeError):
            return None

    def remaining_arguments(self) -> str:
        return remaining_arguments(self._calls, self._streamed)

    def _parse(self) -> tuple[list[Any], list[bool]]:
        """Every call object so far (the last possibly partial) and whether each is whole."""
        text = self._text
        calls: list[Any] = []
        whole: list[bool] = []
        pos = len(_BOT) if text.startswith(_BOT) else 0
        while pos < len(text):
            call, size = loads_partial_prefix(text[pos:], strings=self._name_sent)
            whole.append(is_complete_json(text[pos : pos + size]))
            pos += size + len(_SEPARATOR)
            if "parameters" in call:
                if not isinstance(call, dict) or "arguments" in call:
                    raise SkipStep("parameters")
                call["arguments"] = call["parameters"]
            calls.append(call)
        return calls, whole

    def _step(self) -> MessageDelta | None:
        calls, whole = self._parse()
        if not calls:
            return None
        current = calls[self._current]
        if len(calls) > self._current + 1:
            return self._next_call(current, len(calls))
        delta: MessageDelta | None = None
        index = self._current
        if not self._name_sent:
            delta = name_delta(current, index)
            self._name_sent = delta is not None
        else:
            arguments = field(current, "arguments")
            if arguments:
                sent = len(self._streamed[index])
                now = dumps(arguments)
                before = field(self._calls[index], "arguments")
                more: str | None = None
                if whole[index]:
                    more = now[sent:]
                elif before:
                    # a partial object is serialized with synthetic closers: only what two parses agree
                    # on is final
                    previous = dumps(before)
                    if now != previous:
                        more = common_prefix(previous, now)[sent:]
                if more is not None:
                    delta = MessageDelta(tool_calls=[ToolCallDelta(index=index, arguments=more)])
                    self._streamed[index] += more
        self._calls = calls
        return delta

    def _next_call(self, current: Any, count: int) -> MessageDelta | None:
        """A new call began: flush what the finished one parsed but did not stream, move on. (vLLM does
        not record the parse on this step.)"""
        delta = flush_finished_call(current, self._current, self._streamed, drop_copies=False)
        self._current = count - 1
        self._name_sent = False
        self._streamed.append("")
        return delta
