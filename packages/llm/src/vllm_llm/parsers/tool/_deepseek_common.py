"""What DeepSeek V3 and V3.1 tool calls share: the markers, and vLLM's streaming state machine for them.

Both formats wrap calls in a section and each call in its own markers (V3 adds a type and a fenced JSON
block, see `deepseek_v3` and `deepseek_v31`); written here with `|` and `_` for the markers' full-width bar
U+FF5C and U+2581:

    text<|tool_calls_begin|><|tool_call_begin|>…call…<|tool_call_end|>…<|tool_calls_end|>

Streaming follows vLLM's parsers step by step, quirks included: the state is read from counts of the call
marker token ids; a call's name goes out once readable, then its arguments as the growing prefix of what
the format's pattern reads in the call so far; text after the section markers streams as content (the
whole-output parse drops it).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from vllm_llm.parsers._base import (
    ExtractedToolCalls,
    MessageDelta,
    ParsedCall,
    ToolCallDelta,
    ToolParser,
    random_tool_call_id,
)
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = [
    "CALLS_BEGIN",
    "CALLS_END",
    "CALL_BEGIN",
    "CALL_END",
    "SEP",
    "DeepSeekToolParser",
    "ReadCall",
]

CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
SEP = "<\uff5ctool\u2581sep\uff5c>"


class ReadCall(msgspec.Struct):
    """A call as read so far from its text: both None when there was nothing to read (vLLM's `{}`)."""

    name: str | None = None
    arguments: str | None = None


class DeepSeekToolParser(ToolParser):
    """The streaming side of DeepSeek V3 / V3.1; subclasses read a call's text and parse whole outputs."""

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        calls_begin = tokenizer.token_to_id(CALLS_BEGIN)
        calls_end = tokenizer.token_to_id(CALLS_END)
        if calls_begin is None or calls_end is None:
            raise RuntimeError(
                f"{type(self).__name__} could not locate tool call start/end tokens in the tokenizer!"
            )
        self._calls_begin_id = calls_begin
        self._call_begin_id = tokenizer.token_to_id(CALL_BEGIN)
        self._call_end_id = tokenizer.token_to_id(CALL_END)
        self._text = ""
        self._ids: list[int] = []
        self._call = -1
        """Index of the call being streamed."""
        self._name_sent = False
        self._read: list[ReadCall] = []
        """Per call: what was read of it at the last step (vLLM's prev_tool_call_arr)."""
        self._streamed: list[str] = []
        """Per call: the arguments streamed so far."""

    def extract(self, text: str) -> ExtractedToolCalls:
        """The calls of a whole output (`whole_calls`), the text before the section as content; all content
        without a section or when `whole_calls` gives None."""
        if CALLS_BEGIN not in text:
            return ExtractedToolCalls(called=False, content=text)
        calls = self.whole_calls(text)
        if calls is None:
            return ExtractedToolCalls(called=False, content=text)
        content = text[: text.find(CALLS_BEGIN)]
        return ExtractedToolCalls(called=True, calls=calls, content=content or None)

    @abc.abstractmethod
    def whole_calls(self, text: str) -> list[ParsedCall] | None:
        """The calls of a whole output that has the section; None when it is all content."""

    @abc.abstractmethod
    def read_call(self, portion: str) -> ReadCall | None:
        """Name and arguments readable in a call's text so far (after its begin marker), or None."""

    # ---- streamed -------------------------------------------------------------------------------------

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        previous_ids = self._ids
        self._text += delta_text
        self._ids = previous_ids + list(delta_token_ids)
        return self._step(previous_ids, delta_text, len(delta_token_ids))

    def _step(self, previous_ids: list[int], delta: str, delta_count: int) -> MessageDelta | None:
        text, ids = self._text, self._ids
        if self._calls_begin_id not in ids:
            return MessageDelta(content=delta)
        delta = delta.replace(CALLS_BEGIN, "").replace(CALLS_END, "")
        prev_starts = previous_ids.count(self._call_begin_id) if self._call_begin_id is not None else 0
        prev_ends = previous_ids.count(self._call_end_id) if self._call_end_id is not None else 0
        starts = ids.count(self._call_begin_id) if self._call_begin_id is not None else 0
        ends = ids.count(self._call_end_id) if self._call_end_id is not None else 0
        if starts == ends and prev_ends == ends and CALL_END not in delta:
            return MessageDelta(content=delta)  # text between or after calls

        portion: str | None = None
        text_portion: str | None = None
        if CALL_END in delta:
            # vLLM reads the call from the text with the delta appended once more
            portion = (text + delta).split(CALL_BEGIN)[-1].split(CALL_END)[0].rstrip()
            delta = delta.split(CALL_END)[0].rstrip()
            text_portion = delta.lstrip()

        if starts > ends and starts > prev_starts:  # a call begins
            portion = text.split(CALL_BEGIN)[-1] if delta_count > 1 else None
            text_portion = None
            self._call += 1
            self._name_sent = False
            self._streamed.append("")
        elif starts > ends and starts == prev_starts:  # inside a call
            portion = text.split(CALL_BEGIN)[-1]
            text_portion = None
        elif starts == ends and ends >= prev_ends:  # a call ends
            if not self._read:
                return None
            if self._call >= len(self._read):
                return None  # vLLM: an IndexError, caught
            if self._read[self._call].arguments:
                if '"}' not in delta:
                    return None
                rest = delta[: delta.rindex('"}')] + '"}'
                self._streamed[self._call] += rest
                return MessageDelta(tool_calls=[ToolCallDelta(index=self._call, arguments=rest)])
        else:  # more ends than begins
            return MessageDelta(content=delta.replace(CALL_BEGIN, "").replace(CALL_END, ""))

        current = ReadCall()
        if portion:
            read = self.read_call(portion)
            if read is None:
                return None
            current = read

        if not self._name_sent:
            if not current.name:
                return None
            self._name_sent = True
            return MessageDelta(
                tool_calls=[ToolCallDelta(index=self._call, id=random_tool_call_id(), name=current.name)]
            )

        if portion is None:
            return MessageDelta(content=delta) if text_portion is not None else None

        if len(self._read) <= self._call:
            self._read.append(ReadCall())
        if self._call >= len(self._read):
            return None  # vLLM: an IndexError (an earlier call never read), caught
        before = self._read[self._call].arguments
        now = current.arguments
        out: MessageDelta | None = None
        if now and not before:
            out = MessageDelta(tool_calls=[ToolCallDelta(index=self._call, arguments=now)])
            self._streamed[self._call] = now
        elif now and before and len(now) > len(before) and now.startswith(before):
            out = MessageDelta(tool_calls=[ToolCallDelta(index=self._call, arguments=now[len(before) :])])
            self._streamed[self._call] = now
        if self._call == len(self._read) - 1:
            self._read[self._call] = current
        else:
            self._read.append(current)
        return out

    def remaining_arguments(self) -> str:
        if not self._read:
            return ""
        index = len(self._read) - 1
        last = self._read[index].arguments
        expected = last if last is not None else "{}"  # vLLM dumps the missing arguments' default, {}
        sent = self._streamed[index] if index < len(self._streamed) else ""
        return expected[len(sent) :] if expected.startswith(sent) else ""
