"""AI21 Jamba tool calls (`--tool-call-parser jamba`, vLLM's JambaToolParser).

The calls are one JSON array between tags, after any text:

    Sure.<tool_calls>[{"name": "get_weather", "arguments": {"city": "Paris"}},
    {"name": "get_time", "arguments": {}}]</tool_calls>

Whole: the first complete `<tool_calls>…</tool_calls>` holds the calls (all or nothing); content is the text
before it (None when it is just a space). Streamed: the array is re-parsed as partial JSON at every step and
diffed as vLLM does, quirks included (its argument diffs can repeat or drop text; a client assembles
exactly what vLLM streams).
"""

from __future__ import annotations

import json
import re
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
    dumps,
    field,
    flush_finished_call,
    intermediate_diff,
    is_complete_json,
    loads_partial,
    name_delta,
    remaining_arguments,
)
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["JambaToolParser"]

_START = "<tool_calls>"
_END = "</tool_calls>"
_CALLS = re.compile(r"<tool_calls>(.*?)</tool_calls>", re.DOTALL)


class JambaToolParser(ToolParser):
    """`<tool_calls>[{"name": ..., "arguments": {...}}, ...]</tool_calls>`."""

    keeps_special_tokens: ClassVar[bool] = True

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._start_id = tokenizer.token_to_id(_START)
        self._text = ""
        self._calls: Any = []
        """The array as last parsed (vLLM's prev_tool_call_arr; not updated on the step a call starts)."""
        self._current = -1
        self._name_sent = False
        self._streamed: list[str] = []

    # ---- whole ----------------------------------------------------------------------------------------

    def extract(self, text: str) -> ExtractedToolCalls:
        if _START not in text:
            return ExtractedToolCalls(called=False, content=text)
        found = _CALLS.search(text)
        if found is None:
            return ExtractedToolCalls(called=False, content=text)
        calls: list[ParsedCall] = []
        try:
            for call in json.loads(found.group(1)):
                name, arguments = call["name"], call["arguments"]
                if not isinstance(name, str):
                    return ExtractedToolCalls(called=False, content=text)
                calls.append(ParsedCall(name=name, arguments=dumps(arguments), id=random_tool_call_id()))
        except (ValueError, LookupError, TypeError):
            return ExtractedToolCalls(called=False, content=text)
        content = text[: text.find(_START)]
        return ExtractedToolCalls(
            called=True, calls=calls, content=content if content not in ("", " ") else None
        )

    # ---- streamed -------------------------------------------------------------------------------------

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        self._text += delta_text
        if _START not in self._text:
            return MessageDelta(content=delta_text)
        if len(delta_token_ids) == 1 and delta_token_ids[0] == self._start_id:
            return None  # the start tag alone
        array = self._text.split(_START)[-1].split(_END)[0]
        try:
            return self._step(array, delta_text)
        except (SkipStep, PartialJsonError, LookupError, TypeError):
            return None

    def remaining_arguments(self) -> str:
        calls = self._calls if isinstance(self._calls, list) else []
        return remaining_arguments(calls, self._streamed)

    def _step(self, array: str, delta_text: str) -> MessageDelta | None:
        calls = loads_partial(array, strings=self._name_sent)
        if len(calls) == 0:
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
            before = field(self._calls[index], "arguments")
            now = field(current, "arguments")
            more: str | None = None
            if now and not before:
                # first arguments: up to where this delta's text (with ' read as ") shows in them, or all
                # once the array is whole
                text, piece = dumps(now), delta_text.replace("'", '"')
                at = text.find(piece)
                if at != -1:
                    more = text[: at + len(piece)]
                elif is_complete_json(array):
                    more = text
                else:
                    raise SkipStep("arguments still partial")
            elif now and before:
                more = intermediate_diff(dumps(now), dumps(before))
            if more is not None:
                delta = MessageDelta(tool_calls=[ToolCallDelta(index=index, arguments=more)])
                self._streamed[index] += more
        self._calls = calls
        return delta

    def _next_call(self, current: Any, count: int) -> MessageDelta | None:
        """A new call began: send the finished one's arguments less every copy of what was streamed (as
        vLLM does), move on. The parse is not recorded."""
        delta = flush_finished_call(current, self._current, self._streamed, drop_copies=True)
        self._current = count - 1
        self._name_sent = False
        self._streamed.append("")
        return delta
