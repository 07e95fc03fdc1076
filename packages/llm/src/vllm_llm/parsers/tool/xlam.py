"""xLAM tool calls (`--tool-call-parser xlam`, vLLM's xLAMToolParser), as Salesforce's xLAM models write
them: a JSON list of `{"name": ..., "arguments": {...}}` objects, either the whole answer

    [{"name": "get_weather", "arguments": {"city": "Paris"}}]

or found in the answer: after `</think>`, in a ```json code block, after `[TOOL_CALLS]` (up to the line's
end) or in `<tool_call>…</tool_call>`. The content is the rest of the answer: the text up to `</think>`, or
the answer without the blocks. Ids are `call_{index}_{16 hex digits}`.

Streamed, an answer that starts like a list or a block (or holds one) stops being content; each call's
name is sent once seen, then its arguments once an object follows it (`{` first, then the rest). vLLM's
streaming quirks are kept: every `"name": "..."` counts as a call (one inside arguments too), and at the end
of the stream the last listed call's arguments are appended whole when the last step carried a call piece.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from vllm_llm.parsers._base import ExtractedToolCalls, MessageDelta, ParsedCall, ToolCallDelta, ToolParser
from vllm_llm.parsers.tool._json_family import NAME_FIELD, is_complete_json
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["XlamToolParser"]

_THINK_END = "</think>"
_AFTER_THINK = re.compile(r"</think>([\s\S]*)")
_BLOCKS = (
    re.compile(r"```(?:json)?\s*([\s\S]*?)```"),
    re.compile(r"\[TOOL_CALLS\]([\s\S]*?)(?=\n|$)"),
    re.compile(r"<tool_call>([\s\S]*?)</tool_call>"),
)
_OPEN_CODE_BLOCK = re.compile(r"```(?:json)?\s*([\s\S]*?)(?:```|$)")
_EMPTY_ARGUMENTS = re.compile(r'"name"\s*:\s*"[^"]+"\s*,\s*"arguments"\s*:\s*\{\s*\}')
_ARGUMENTS = re.compile(r'"name"\s*:\s*"[^"]+"\s*,\s*"arguments"\s*:\s*(\{(?:[^{}]|(?:\{[^{}]*\}))*\})')


def _call_id(index: int) -> str:
    return f"call_{index}_{uuid.uuid4().int & 0xFFFF_FFFF_FFFF_FFFF:016x}"


def _find_calls(text: str) -> tuple[str | None, str | None]:
    """(content, the JSON text of the calls) of an output; the JSON is None when there is none."""
    after_think = _AFTER_THINK.search(text)
    if after_think:
        content = text[: after_think.start() + len(_THINK_END)].strip()
        rest = after_think.group(1).strip()
        if is_complete_json(rest):
            return content, rest
        for block in _BLOCKS:
            for found in block.findall(rest):
                if is_complete_json(found):
                    return content, found
    for block in _BLOCKS:
        for found in block.findall(text):
            if is_complete_json(found):
                return block.sub("", text).strip(), found
    if text.strip().startswith("["):
        if is_complete_json(text):
            return None, text
        # not JSON (yet), but a call list in progress
        if "{" in text and "name" in text and "arguments" in text:
            return None, text
    return text, None


class _Sent:
    """What was streamed of one call."""

    def __init__(self) -> None:
        self.name = False
        self.arguments_started = False
        self.arguments = ""


class XlamToolParser(ToolParser):
    """A JSON call list, whole or in a block."""

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._text = ""
        self._index = -1
        self._sent: list[_Sent] = []
        self._last_list: list[Any] = []
        """The last complete call list seen while streaming (vLLM's prev_tool_call_arr)."""

    # ---- whole ----

    def extract(self, text: str) -> ExtractedToolCalls:
        try:
            return self._extract(text)
        except Exception:  # as vLLM: whatever fails is text
            return ExtractedToolCalls(called=False, content=text)

    @staticmethod
    def _extract(text: str) -> ExtractedToolCalls:
        content, calls_json = _find_calls(text)
        if not calls_json:
            return ExtractedToolCalls(called=False, content=content)
        data = json.loads(calls_json)
        if not isinstance(data, list):
            return ExtractedToolCalls(called=False, content=content or text)
        calls: list[ParsedCall] = []
        for index, item in enumerate(data):
            if not isinstance(item, dict) or "name" not in item or "arguments" not in item:
                continue
            name, arguments = item["name"], item["arguments"]
            if isinstance(arguments, dict):
                arguments = json.dumps(arguments, ensure_ascii=False)
            if not isinstance(name, str) or not isinstance(arguments, str):
                raise TypeError("a call's name and arguments must be strings")  # vLLM's validation error
            calls.append(ParsedCall(name=name, arguments=arguments, id=_call_id(index)))
        return ExtractedToolCalls(called=bool(calls), calls=calls, content=content)

    # ---- streamed ----

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        self._text += delta_text
        text = self._text
        stripped = text.strip()
        _, calls_json = _find_calls(text)
        block_opened = (
            "```json" in text or "```\n[" in text or "[TOOL_CALLS]" in text or "<tool_call>" in text
        )
        if not (
            stripped.startswith(("[", "<tool_call>", "[TOOL_CALLS]"))
            or "</think>[" in text
            or calls_json is not None
            or (block_opened and '"name"' in text and '"arguments"' in text)
        ):
            return MessageDelta(content=delta_text)
        try:
            calls = self._step(calls_json, block_opened)
        except Exception:  # as vLLM: a failing step sends its text as content
            return MessageDelta(content=delta_text)
        return MessageDelta(tool_calls=[calls]) if calls is not None else None

    def _step(self, calls_json: str | None, block_opened: bool) -> ToolCallDelta | None:
        text = self._text
        try:
            parsed = json.loads(calls_json or text)
            if isinstance(parsed, list):
                self._last_list = parsed
        except json.JSONDecodeError:
            pass
        search = calls_json or text
        if not calls_json and block_opened:
            block = _OPEN_CODE_BLOCK.search(text)
            if block:
                inner = block.group(1).strip()
                if inner.startswith("[") and '"name"' in inner and '"arguments"' in inner:
                    search = inner
        names = list(NAME_FIELD.finditer(search))
        count = len(names)
        if count == 0:
            return None
        while len(self._sent) < count:
            self._sent.append(_Sent())
        index = self._index
        if index == -1 or index < count - 1:
            following = index + 1
            if following < count and not self._sent[following].name:
                self._index = following
                self._sent[following].name = True
                return ToolCallDelta(index=following, id=_call_id(following), name=names[following].group(1))
        if 0 <= index < count:
            return self._arguments_step(index, count, search)
        return None

    def _arguments_step(self, index: int, count: int, search: str) -> ToolCallDelta | None:
        sent = self._sent[index]
        empty = _EMPTY_ARGUMENTS.search(search)
        # vLLM's quirk: `"arguments": {}` anywhere makes the current call's arguments `{}` if none were sent.
        if empty and empty.start() > 0 and not sent.arguments_started:
            sent.arguments_started = True
            sent.arguments = "{}"
            if index < count - 1:
                self._index += 1
            return ToolCallDelta(index=index, arguments="{}")
        objects = list(_ARGUMENTS.finditer(search))
        if index >= len(objects):
            return None
        arguments = objects[index].group(1)
        if count > 1:
            try:
                parsed = json.loads(search)
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, list) and index < len(parsed):
                value = parsed[index].get("arguments")  # not a dict: vLLM's AttributeError, content
                if isinstance(value, dict):
                    arguments = json.dumps(value, ensure_ascii=False)
                else:
                    arguments = str(parsed[index].get("arguments", "{}"))
        if not sent.arguments_started and arguments.startswith("{"):
            sent.arguments_started = True
            sent.arguments = "{"
            return ToolCallDelta(index=index, arguments="{")
        if arguments.startswith(sent.arguments):
            new = arguments[len(sent.arguments) :]
            if new:
                sent.arguments = arguments
                return ToolCallDelta(index=index, arguments=new)
        if arguments.endswith("}") and arguments == sent.arguments and index < count - 1:
            self._index += 1
        return None

    def remaining_arguments(self) -> str:
        # vLLM compares the last listed call's arguments with what its base class recorded as streamed,
        # which this parser never records: the whole of them counts as unsent.
        if not self._last_list:
            return ""
        last = self._last_list[-1]
        arguments = last.get("arguments", {})  # not a dict: vLLM fails here too
        return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
