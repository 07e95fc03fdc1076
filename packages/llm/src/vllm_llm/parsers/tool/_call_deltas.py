"""How vLLM's ParserEngine turns a format's events into message deltas and calls, shared by the three ports
of that engine here (`_tagged.py`'s tagged formats, `_mistral_calls.py`'s Mistral and Granite, Kimi K2).

Content rules: text that follows a call piece in the same step is held until a step without call pieces;
content that is only whitespace is held for more (dropped once a call started, sent at the end otherwise);
trailing whitespace of streamed reasoning is held until more reasoning follows. Pieces of one call sent in
one step go out as one delta. Arguments stream as the part of their JSON that cannot change any more.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Iterable
from typing import Protocol

from vllm_llm.parsers._base import MessageDelta, ToolCallDelta

__all__ = [
    "CallHooks",
    "DeltaContent",
    "Ev",
    "json_call",
    "merge_call_deltas",
    "name_in_arguments",
    "stable_json_prefix",
]


class Ev(enum.Enum):
    """What an engine event means: a piece of text or a marker, read in the state it occurs in."""

    TEXT = "text"
    START = "start"  # a call starts (a new index)
    NAME = "name"  # text of the call's name
    ARGS = "args"  # text of the call's raw arguments
    END = "end"  # the call ends
    REASONING = "reasoning"  # text of reasoning
    REASONING_END = "reasoning_end"  # reasoning ends


class CallHooks(Protocol):
    """What a format does with the call events of a step (`DeltaContent.step`)."""

    def on_start(self, index: int) -> None: ...

    def on_name(self, index: int, text: str) -> None: ...

    def on_arguments(self, index: int, text: str, pieces: list[ToolCallDelta]) -> None: ...

    def on_end(self, index: int, pieces: list[ToolCallDelta]) -> None: ...

    def on_reasoning_end(self) -> None: ...

    def has_calls(self) -> bool:
        """Whether any call was started."""
        ...


_NAME_IN_ARGS = re.compile(r'"name"\s*:\s*"([^"]*)"')
_JSON_WS = " \t\n\r"


class DeltaContent:
    """The content and reasoning a stream holds back between steps, and the delta of one step."""

    __slots__ = ("held", "held_reasoning", "seen")

    def __init__(self) -> None:
        self.held = ""
        """Content held back: text after call pieces, or whitespace that may turn out to precede calls."""
        self.seen = False
        """Content other than whitespace was sent."""
        self.held_reasoning = ""

    def step(
        self, events: Iterable[tuple[Ev, str, int]], hooks: CallHooks, *, suppress: bool, finished: bool
    ) -> MessageDelta | None:
        """The delta of one step's events (None for nothing to send yet); call events go to `hooks`, or
        nowhere when `suppress` (vLLM's tool_choice "none" with tools: call markup just disappears)."""
        pieces: list[ToolCallDelta] = []
        parts: list[str] = []
        reasoning: list[str] = []
        carried = self.held
        in_calls = False
        for kind, text, index in events:
            if kind is Ev.TEXT:
                if in_calls:
                    self.held += text
                else:
                    parts.append(text)
            elif kind is Ev.REASONING:
                reasoning.append(text)
            elif kind is Ev.REASONING_END:
                hooks.on_reasoning_end()
            elif not suppress:
                in_calls = True
                if kind is Ev.START:
                    hooks.on_start(index)
                elif kind is Ev.NAME:
                    hooks.on_name(index, text)
                elif kind is Ev.ARGS:
                    hooks.on_arguments(index, text, pieces)
                else:
                    hooks.on_end(index, pieces)
        return self.settle(
            parts,
            carried,
            merge_call_deltas(pieces),
            in_calls=in_calls,
            any_calls=hooks.has_calls(),
            finished=finished,
            reasoning="".join(reasoning),
        )

    def settle(
        self,
        parts: list[str],
        carried: str,
        pieces: list[ToolCallDelta],
        *,
        in_calls: bool,
        any_calls: bool,
        finished: bool,
        reasoning: str = "",
    ) -> MessageDelta | None:
        """The delta of a step: its text `parts` (`carried`: what was held before it), its call `pieces`
        (merged), whether the step had call events (`in_calls`) and any call was ever started."""
        if self.held and (not in_calls or not pieces):
            parts = [carried, *parts, self.held[len(carried) :]]
            self.held = ""
        content = "".join(parts)
        if not self.seen and content:
            if content.strip():
                self.seen = True
            elif any_calls:
                content = ""  # whitespace before calls is dropped
            elif not finished:
                self.held, content = content, ""
        if not (content or pieces or reasoning):
            return None
        return MessageDelta(content=content or None, reasoning=reasoning or None, tool_calls=pieces)

    def trim_reasoning(self, delta: MessageDelta | None, *, reasoning_ended: bool) -> MessageDelta | None:
        """Hold back trailing whitespace of streamed reasoning until more reasoning follows (dropped once
        reasoning ended)."""
        if delta is not None and delta.reasoning is not None:
            said = self.held_reasoning + delta.reasoning
            kept = said.rstrip()
            self.held_reasoning = said[len(kept) :]
            delta.reasoning = kept or None
            if delta.reasoning is None and delta.content is None and not delta.tool_calls:
                return None
        elif self.held_reasoning and reasoning_ended:
            self.held_reasoning = ""
        return delta


def merge_call_deltas(pieces: list[ToolCallDelta]) -> list[ToolCallDelta]:
    """One delta per call index (the first id and name, the arguments joined)."""
    merged: dict[int, ToolCallDelta] = {}
    for piece in pieces:
        into = merged.setdefault(piece.index, piece)
        if into is piece:
            continue
        into.id = into.id if into.id is not None else piece.id
        into.name = into.name if into.name is not None else piece.name
        if piece.arguments is not None:
            into.arguments = (into.arguments or "") + piece.arguments
    return list(merged.values())


def name_in_arguments(raw: str) -> str | None:
    """A `"name": "..."` spelled in raw arguments (vLLM looks for one when the markup gave no name)."""
    found = _NAME_IN_ARGS.search(raw)
    return (found.group(1) or None) if found else None


def json_call(raw: str) -> tuple[str, str]:
    """(name, arguments) of a nameless call's body written as `{"name": ..., "arguments"|"parameters": ...}`
    (else the object without its name is the arguments); ("", the body) when it is not a JSON object. A name
    that is not a string reads as "" (vLLM fails on it)."""
    raw = raw.strip()
    try:
        parsed = json.loads(raw)
    except ValueError:
        return "", raw
    if not isinstance(parsed, dict):
        return "", raw
    name = parsed.get("name", "")
    name = name if isinstance(name, str) else ""
    for key in ("arguments", "parameters"):
        if key in parsed:
            value = parsed[key]
            return name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return name, json.dumps({k: v for k, v in parsed.items() if k != "name"}, ensure_ascii=False)


def stable_json_prefix(arguments: str, string_keys: set[str] | None) -> str:
    """The part of a growing JSON object that later text cannot change: up to the last top-level value,
    or into it while it is a string of one of `string_keys` (any key when None)."""
    colon = -1
    last_key: str | None = None
    key: str | None = None
    in_string = escaped = False
    string_start = depth = 0
    for i, char in enumerate(arguments):
        if escaped:
            escaped = False
        elif in_string:
            if char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                if depth == 1:
                    key = arguments[string_start + 1 : i]
        elif char == '"':
            in_string = True
            string_start = i
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
        elif char == ":" and depth == 1:
            colon, last_key, key = i, key, None
    if colon < 0:
        return ""
    end = colon + 1
    while end < len(arguments) and arguments[end] in _JSON_WS:
        end += 1
    if end >= len(arguments) or arguments[end] != '"':
        return arguments[:end]
    if string_keys is not None and last_key not in string_keys:
        return arguments[:end]
    escaped = False
    for i in range(end + 1, len(arguments)):
        if escaped:
            escaped = False
        elif arguments[i] == "\\":
            escaped = True
        elif arguments[i] == '"':
            return arguments[:i]
    return arguments
