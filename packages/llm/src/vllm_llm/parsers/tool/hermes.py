"""Hermes 2 Pro / Qwen tool calls (`--tool-call-parser hermes`, alias `qwen3_json`; vLLM's
Hermes2ProToolParser).

Each call is a JSON object between tags, after any text:

    Let me check.<tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>
    <tool_call>
    {"name": "get_time", "arguments": {}}
    </tool_call>

A last `<tool_call>` without its end tag still counts (output cut off). Content is the text before the
first `<tool_call>`; text after the calls is dropped. One malformed call makes the whole output content.
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
    NAME_FIELD,
    dumps,
    is_complete_json,
    partial_tag_overlap,
    remaining_arguments,
)
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["HermesToolParser"]

_START = "<tool_call>"
_END = "</tool_call>"
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)
_ARGUMENTS = re.compile(r'"arguments"\s*:\s*')


class HermesToolParser(ToolParser):
    """`<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, repeated."""

    supports_required_and_named: ClassVar[bool] = False  # vLLM: a structural-tag model under strict tools
    structural_tag_model: ClassVar[str | None] = "hermes"
    keeps_special_tokens: ClassVar[bool] = True

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._text = ""
        self._sent = 0
        """How much of the text went out as content."""
        self._names: list[str | None] = []
        self._arguments: list[str | None] = []
        """Per call seen: the arguments text as last streamed (None before any)."""
        self._streamed: list[str] = []

    # ---- whole ----------------------------------------------------------------------------------------

    def extract(self, text: str) -> ExtractedToolCalls:
        if _START not in text:
            return ExtractedToolCalls(called=False, content=text)
        calls: list[ParsedCall] = []
        for closed, open_ended in _CALL.findall(text):
            try:
                call = json.loads(closed or open_ended)
                name, arguments = call["name"], call["arguments"]
            except (ValueError, LookupError, TypeError):
                return ExtractedToolCalls(called=False, content=text)
            if not isinstance(name, str):
                return ExtractedToolCalls(called=False, content=text)
            calls.append(ParsedCall(name=name, arguments=dumps(arguments), id=random_tool_call_id()))
        content = text[: text.find(_START)]
        return ExtractedToolCalls(called=True, calls=calls, content=content or None)

    # ---- streamed -------------------------------------------------------------------------------------

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        self._text += delta_text
        content = self._new_content()
        pieces: list[ToolCallDelta] = []
        for index, (body, whole) in enumerate(self._bodies()):
            if index == len(self._names):
                self._names.append(None)
                self._arguments.append(None)
                self._streamed.append("")
            if self._names[index] is None:
                found = NAME_FIELD.search(body)
                if found is None:
                    break  # a later call waits for this one's name
                self._names[index] = found.group(1)
                pieces.append(ToolCallDelta(index=index, id=random_tool_call_id(), name=found.group(1)))
            more = self._more_arguments(index, body, whole)
            if more:
                pieces.append(ToolCallDelta(index=index, arguments=more))
        if content or pieces:
            return MessageDelta(content=content, tool_calls=pieces)
        return None

    def remaining_arguments(self) -> str:
        calls = [{} if a is None else {"arguments": a} for a in self._arguments]
        return remaining_arguments(calls, self._streamed)

    def _new_content(self) -> str | None:
        """Text not sent yet before the first call, holding back what may be the start of a tag."""
        text = self._text
        at = text.find(_START)
        end = at if at >= 0 else len(text) - partial_tag_overlap(text, _START)
        if end <= self._sent:
            return None
        content, self._sent = text[self._sent : end], end
        return content

    def _bodies(self) -> list[tuple[str, bool]]:
        """Each call's JSON text so far, and whether it is whole (closed, or valid JSON already)."""
        text, bodies, pos = self._text, [], 0
        while (start := text.find(_START, pos)) >= 0:
            start += len(_START)
            end = text.find(_END, start)
            if end >= 0:
                bodies.append((text[start:end].strip(), True))
                pos = end + len(_END)
                continue
            rest = text[start:]
            overlap = partial_tag_overlap(rest, _END)
            body = (rest[:-overlap] if overlap else rest).strip()
            bodies.append((body, bool(body) and is_complete_json(body)))
            break
        return bodies

    def _more_arguments(self, index: int, body: str, whole: bool) -> str | None:
        """The arguments text of call `index` past what was streamed: the raw text after `"arguments":`
        (without the object's closing brace once whole). vLLM compares lengths only, not content."""
        found = _ARGUMENTS.search(body)
        if found is None:
            return None
        arguments = body[found.end() :]
        if whole:
            arguments = arguments.rstrip()
            if arguments.endswith("}"):
                arguments = arguments[:-1].rstrip()
        sent = self._streamed[index]
        if len(arguments) <= len(sent):
            return None
        self._streamed[index] = self._arguments[index] = arguments
        return arguments[len(sent) :]
