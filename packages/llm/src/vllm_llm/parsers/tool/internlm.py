"""InternLM 2 / 2.5 tool calls (`--tool-call-parser internlm`, vLLM's Internlm2ToolParser).

One call per output, a JSON object after the plugin action markers, `parameters` (or `arguments`) holding
the arguments:

    I will look it up.<|action_start|><|plugin|>
    {"name": "get_weather", "parameters": {"city": "Paris"}}<|action_end|>

Content is the text before the markers. Only the first call is streamed; vLLM fails on a second one.
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
    is_complete_json,
    loads_partial,
    remaining_arguments,
)
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["InternLm2ToolParser"]

_ACTION = "<|action_start|>"
_START = "<|action_start|><|plugin|>"
_END = "<|action_end|>"


def _arguments(call: Mapping[str, Any]) -> Any:
    if "parameters" in call:
        return call.get("parameters")
    if "arguments" in call:
        return call.get("arguments")
    return None


class InternLm2ToolParser(ToolParser):
    """`<|action_start|><|plugin|>{"name": ..., "parameters": {...}}<|action_end|>`, once."""

    keeps_special_tokens: ClassVar[bool] = True

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._text = ""
        self._position = 0
        """Where the text not yet sent as content begins."""
        self._call: dict[str, Any] | None = None
        """The call as last parsed, its arguments under "arguments"."""
        self._current = -1
        self._name_sent = False
        self._streamed: list[str] = []

    # ---- whole ----------------------------------------------------------------------------------------

    def extract(self, text: str) -> ExtractedToolCalls:
        """The call, and the text before it as content. (Where vLLM raises: no call, all content.)"""
        if _START not in text:
            return ExtractedToolCalls(called=False, content=text)
        parts = text.split(_START)
        if len(parts) != 2:
            return ExtractedToolCalls(called=False, content=text)
        content, action = parts
        action = action.split(_END)[0]
        action = action[action.find("{") :]
        try:
            call = json.loads(action)
            name = call["name"]
            arguments = call.get("parameters", call.get("arguments", {}))
        except (ValueError, LookupError, TypeError, AttributeError):
            return ExtractedToolCalls(called=False, content=text)
        if not isinstance(name, str):
            return ExtractedToolCalls(called=False, content=text)
        call_out = ParsedCall(name=name, arguments=dumps(arguments), id=random_tool_call_id())
        return ExtractedToolCalls(called=True, calls=[call_out], content=content or None)

    # ---- streamed -------------------------------------------------------------------------------------

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        self._text += delta_text
        text = self._text
        if _ACTION not in text:
            self._position = len(text)
            return MessageDelta(content=delta_text)
        if self._current > 0:
            return MessageDelta(content="")
        rest = text[self._position :]
        if _START not in rest:
            return None
        before, _, action = rest.partition(_START)
        if _START in action:
            return None  # a second call: vLLM fails on it
        if before:
            self._position += len(before)
            return MessageDelta(content=before)
        action = action.strip().split(_END)[0]
        try:
            call = loads_partial(action, strings=self._name_sent)
            if not isinstance(call, dict):
                raise SkipStep("not an object")
            delta = self._more_arguments(call, action, delta_text) if self._name_sent else self._name(call)
        except (SkipStep, PartialJsonError):
            return None
        call["arguments"] = _arguments(call)
        self._call = call
        return delta

    def remaining_arguments(self) -> str:
        return remaining_arguments([] if self._call is None else [self._call], self._streamed)

    def _name(self, call: dict[str, Any]) -> MessageDelta | None:
        name = call.get("name")
        if not name:
            return None
        self._current += 1
        if not isinstance(name, str):
            raise SkipStep("name")  # vLLM fails after counting the call
        self._name_sent = True
        self._streamed.append("")
        return MessageDelta(
            tool_calls=[ToolCallDelta(index=self._current, id=random_tool_call_id(), name=name)]
        )

    def _more_arguments(self, call: dict[str, Any], action: str, delta_text: str) -> MessageDelta | None:
        """The arguments' new text, if any; raises SkipStep to send nothing and not record the parse."""
        before = _arguments(self._call) if self._call is not None else None
        now = _arguments(call)
        index = self._current
        if not now:
            return None
        if not before:
            # first arguments: up to where this delta's text shows in them, or all once whole
            text = dumps(now)
            at = text.find(delta_text)
            if at != -1:
                more = text[: at + len(delta_text)]
            elif is_complete_json(action):
                more = text
            else:
                raise SkipStep("arguments still partial")
        elif is_complete_json(action):
            more = dumps(now)[len(self._streamed[index]) :]
        else:
            # a partial object is serialized with synthetic closers: only what two parses agree on is final
            text, previous = dumps(now), dumps(before)
            more = common_prefix(previous, text)[len(self._streamed[index]) :] if text != previous else ""
        self._streamed[index] += more
        return MessageDelta(tool_calls=[ToolCallDelta(index=index, arguments=more)])
