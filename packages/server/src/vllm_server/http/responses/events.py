"""The streaming events of a Responses request over a non-Harmony model, as vLLM 0.32's
SimpleStreamingEventProcessor emits them.

Each parsed delta is split into reasoning, content and tool-call parts (that order, calls grouped by
index). The part picks a state: a tool call (one with a function) over reasoning over non-empty content.
Entering another state (or another call) closes the open item (`*.done`, `content_part.done`,
`output_item.done`) and opens the new one (`output_item.added`, and `content_part.added` for text and
reasoning); then the part's delta follows (`output_text.delta`, `reasoning_text.delta`,
`function_call_arguments.delta`). The end of the stream closes the open item. The closed items are the
response's output.
"""

from __future__ import annotations

import enum
from typing import Any

from vllm_llm import ChatDelta, ToolCallDelta
from vllm_server.http.responses.objects import (
    call_id,
    function_call_item,
    item_id,
    message_item,
    reasoning_item,
    text_part,
)

__all__ = ["EventProcessor"]

Event = dict[str, Any]


class _State(enum.Enum):
    NONE = enum.auto()
    CONTENT = enum.auto()
    REASONING = enum.auto()
    TOOL_CALL = enum.auto()


class _Part:
    """One atomic piece of a delta: reasoning, content, or the tool calls of one index."""

    __slots__ = ("content", "reasoning", "tool_calls")

    def __init__(
        self,
        *,
        content: str | None = None,
        reasoning: str | None = None,
        tool_calls: list[ToolCallDelta] | None = None,
    ) -> None:
        self.content = content
        self.reasoning = reasoning
        self.tool_calls = tool_calls or []


def _split(d: ChatDelta) -> list[_Part]:
    """vLLM's split_delta."""
    parts = [
        _Part(reasoning=d.reasoning) if d.reasoning is not None else None,
        _Part(content=d.content) if d.content is not None else None,
    ]
    out = [p for p in parts if p is not None]
    groups: dict[int, list[ToolCallDelta]] = {}
    for call in d.tool_calls:
        groups.setdefault(call.index, []).append(call)
    out += [_Part(tool_calls=calls) for calls in groups.values()]
    return out


def _has_function(call: ToolCallDelta) -> bool:
    return call.name is not None or call.arguments is not None


class EventProcessor:
    """The event state machine of one streamed response; `output` holds the closed items."""

    def __init__(self) -> None:
        self.output: list[dict[str, Any]] = []
        self._state = _State.NONE
        self._index = 0
        self._item = ""
        self._text = ""
        self._call_id = ""
        self._call_name = ""
        self._call_index: int | None = None

    def feed(self, d: ChatDelta) -> list[Event]:
        """The events of one parsed delta."""
        events: list[Event] = []
        for part in _split(d):
            state, call = self._target(part)
            if state is _State.NONE:
                continue
            if self._needs_transition(state, call):
                events += self.close()
                events += self._open(state, call)
            events += self._delta(part)
        return events

    def _target(self, part: _Part) -> tuple[_State, ToolCallDelta | None]:
        if part.tool_calls and _has_function(part.tool_calls[0]):
            return _State.TOOL_CALL, part.tool_calls[0]
        if part.reasoning is not None:
            return _State.REASONING, None
        if part.content:
            return _State.CONTENT, None
        return _State.NONE, None

    def _needs_transition(self, state: _State, call: ToolCallDelta | None) -> bool:
        if self._state is not state:
            return True
        return (
            state is _State.TOOL_CALL
            and call is not None
            and self._call_index is not None
            and self._call_index != call.index
        )

    # ---- open ------------------------------------------------------------------------------------------

    def _open(self, state: _State, call: ToolCallDelta | None) -> list[Event]:
        self._state = state
        self._text = ""
        if state is _State.TOOL_CALL:
            assert call is not None
            self._item = item_id("fc")
            self._call_id = call.id or call_id()
            self._call_name = call.name or ""
            self._call_index = call.index
            item = function_call_item(self._item, self._call_id, self._call_name, "", "in_progress")
            return [self._added(item)]
        if state is _State.REASONING:
            self._item = item_id("rs")
            added = self._added(reasoning_item(self._item, None, "in_progress"))
            return [added, self._part_added({"text": "", "type": "reasoning_text"})]
        self._item = item_id("msg")
        added = self._added(message_item(self._item, [], "in_progress"))
        return [added, self._part_added(text_part("", []))]

    def _added(self, item: dict[str, Any]) -> Event:
        return {"item": item, "output_index": self._index, "type": "response.output_item.added"}

    def _part_added(self, part: dict[str, Any]) -> Event:
        return {
            "content_index": 0,
            "item_id": self._item,
            "output_index": self._index,
            "part": part,
            "type": "response.content_part.added",
        }

    # ---- delta -----------------------------------------------------------------------------------------

    def _delta(self, part: _Part) -> list[Event]:
        where = {"item_id": self._item, "output_index": self._index}
        if self._state is _State.TOOL_CALL:
            args = "".join(c.arguments for c in part.tool_calls if _has_function(c) and c.arguments)
            if not args:
                return []
            self._text += args
            return [{**where, "delta": args, "type": "response.function_call_arguments.delta"}]
        if self._state is _State.REASONING:
            assert part.reasoning is not None
            self._text += part.reasoning
            return [
                {
                    **where,
                    "content_index": 0,
                    "delta": part.reasoning,
                    "type": "response.reasoning_text.delta",
                }
            ]
        assert part.content is not None
        self._text += part.content
        return [
            {
                **where,
                "content_index": 0,
                "delta": part.content,
                "logprobs": [],
                "type": "response.output_text.delta",
            }
        ]

    # ---- close -----------------------------------------------------------------------------------------

    def close(self) -> list[Event]:
        """Close the open item (nothing when none is open)."""
        state = self._state
        if state is _State.NONE:
            return []
        where = {"item_id": self._item, "output_index": self._index}
        text = self._text
        events: list[Event]
        if state is _State.TOOL_CALL:
            item = function_call_item(self._item, self._call_id, self._call_name, text, "completed")
            events = [
                {
                    **where,
                    "arguments": text,
                    "name": self._call_name,
                    "type": "response.function_call_arguments.done",
                }
            ]
            self._call_index = None
        elif state is _State.REASONING:
            part = {"text": text, "type": "reasoning_text"}
            item = reasoning_item(self._item, text, "completed")
            events = [
                {**where, "content_index": 0, "text": text, "type": "response.reasoning_text.done"},
                {**where, "content_index": 0, "part": part, "type": "response.content_part.done"},
            ]
        else:
            done_part = text_part(text, None)
            item = message_item(self._item, [done_part] if text else [], "completed")
            events = [
                {
                    **where,
                    "content_index": 0,
                    "logprobs": [],
                    "text": text,
                    "type": "response.output_text.done",
                },
                {**where, "content_index": 0, "part": done_part, "type": "response.content_part.done"},
            ]
        events.append({"item": item, "output_index": self._index, "type": "response.output_item.done"})
        self.output.append(item)
        self._index += 1
        self._state = _State.NONE
        return events
