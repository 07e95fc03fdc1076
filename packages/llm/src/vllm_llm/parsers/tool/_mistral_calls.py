"""Engine events turned into message deltas and whole calls (vLLM's ParserEngine around its streaming
engine), shared by the Mistral and Granite parsers; a format overrides the hooks (`accept_name`,
`name_from_args`, `convert`, ...).

Content rules, as vLLM's: text that follows a call piece in the same step waits until a step without call
pieces; content that is only whitespace waits for more (it is dropped once a call started, and sent at the
end otherwise); trailing whitespace of reasoning waits until more reasoning follows. A call's name goes out
once known, its arguments as they come (through `convert` when the format nests them), and the whole parse
reads each call's arguments as JSON corrected to the tool's schema.
"""

from __future__ import annotations

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
from vllm_llm.parsers.tool._arg_types import streamable_string_keys, tool_properties, typed_arguments
from vllm_llm.parsers.tool._call_deltas import (
    DeltaContent,
    json_call,
    name_in_arguments,
    stable_json_prefix,
)
from vllm_llm.parsers.tool._mistral_engine import Event, MarkupEngine

__all__ = ["CallAssembler", "MarkupToolParser", "Slot"]


class Slot:
    """One call being assembled."""

    __slots__ = ("args", "id", "name", "name_sent", "streamed", "string_keys")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.args = ""
        self.name_sent = False
        self.string_keys: set[str] | None = None
        self.streamed = ""
        """Converted arguments sent so far (formats with `convert`)."""


class CallAssembler:
    """The calls and content of one output, from its events (streamed with `delta`, whole with `whole`)."""

    converts: ClassVar[bool] = False
    """Arguments are carved out of the call body by `convert` (else the body is the arguments)."""
    echo_first_args: ClassVar[bool] = False
    """The argument chunk that reveals the name is sent with it (else only later chunks are)."""

    def __init__(self, tools: Sequence[Mapping[str, Any]], *, reasoning_open: bool = False) -> None:
        self.tools = tools
        self._reasoning_open = reasoning_open
        self.suppress = False
        """Calls are not assembled (tool_choice "none"): their markup just disappears from the content."""
        self.reset()

    def reset(self) -> None:
        self.slots: list[Slot] = []
        self.content = DeltaContent()
        self.reasoning_ended = not self._reasoning_open

    # ---- format hooks ------------------------------------------------------------------------------

    def new_id(self) -> str:
        return random_tool_call_id()

    def accept_name(self, name: str) -> bool:
        return bool(name)

    def name_from_args(self, slot: Slot) -> str | None:
        """The name found in the call body so far (`"name": "..."`)."""
        return name_in_arguments(slot.args)

    def convert(self, body: str, partial: bool) -> str:
        """The arguments JSON of a (partial) call body; ValueError when it has none that can be read."""
        raise NotImplementedError

    def whole_name_and_args(self, body: str) -> tuple[str, str]:
        """Name and arguments of a nameless call's body: `{"name": ..., "arguments" | "parameters": ...}`,
        or the object without its name as the arguments; the body itself when it is not a JSON object."""
        return json_call(body)

    def whole_args(self, body: str, name: str) -> str:
        return self.whole_name_and_args(body)[1] if body.strip() else "{}"

    # ---- streamed ----------------------------------------------------------------------------------

    def delta(self, events: list[Event], *, finished: bool = False) -> MessageDelta | None:
        """What one step's events add to the message (None for nothing to send yet)."""
        if not events and not self.content.held:
            return None
        triples = ((event.kind, event.value, event.call) for event in events)
        return self.content.step(triples, self, suppress=self.suppress, finished=finished)

    # ---- call hooks (`CallHooks`) ------------------------------------------------------------------

    def on_start(self, index: int) -> None:
        while len(self.slots) <= index:
            self.slots.append(Slot())

    def on_name(self, index: int, text: str) -> None:
        self.slots[index].name += text

    def on_reasoning_end(self) -> None:
        self.reasoning_ended = True

    def has_calls(self) -> bool:
        return bool(self.slots)

    def trim_reasoning(self, delta: MessageDelta | None) -> MessageDelta | None:
        """Hold back trailing whitespace of streamed reasoning until more reasoning follows (dropped once
        reasoning ended)."""
        return self.content.trim_reasoning(delta, reasoning_ended=self.reasoning_ended)

    def _send_name(
        self, index: int, name: str | None, calls: list[ToolCallDelta], arguments: str | None
    ) -> bool:
        if name is None or not self.accept_name(name):
            return False
        slot = self.slots[index]
        slot.name = name
        slot.name_sent = True
        slot.string_keys = streamable_string_keys(tool_properties(self.tools, name, bare_tools=True))
        if not slot.id:
            slot.id = self.new_id()
        calls.append(ToolCallDelta(index=index, id=slot.id, name=name, arguments=arguments))
        return True

    def on_arguments(self, index: int, text: str, calls: list[ToolCallDelta]) -> None:
        slot = self.slots[index]
        slot.args += text
        if slot.name_sent:
            if text and (piece := self._arg_piece(slot, text)):
                calls.append(ToolCallDelta(index=index, arguments=piece))
            return
        if slot.name:
            sent = self._send_name(index, slot.name, calls, None)
        elif text:
            sent = self._send_name(index, self.name_from_args(slot), calls, None)
        else:
            sent = False
        if sent and text and self.echo_first_args:
            calls.append(ToolCallDelta(index=index, arguments=text))

    def on_end(self, index: int, calls: list[ToolCallDelta]) -> None:
        if index >= len(self.slots):
            return
        slot = self.slots[index]
        rest = self._final_piece(slot)
        if not slot.name_sent and self._send_name(
            index, slot.name or self.name_from_args(slot) or "", calls, rest or ""
        ):
            return
        if rest and slot.name_sent:
            calls.append(ToolCallDelta(index=index, arguments=rest))

    def _typed(self, arguments: str, name: str) -> str:
        """`arguments` typed by the named tool's schema (vLLM's `_fix_arg_types`; a tool without a
        `function` member is read as the function itself)."""
        if not self.tools or not name:
            return arguments
        return typed_arguments(arguments, tool_properties(self.tools, name, bare_tools=True))

    def _arg_piece(self, slot: Slot, raw: str) -> str | None:
        """The arguments text a new body chunk adds: the chunk itself, or for converting formats the growth
        of the safe prefix of the converted arguments."""
        if not self.converts:
            return raw
        try:
            current = self.convert(slot.args, True)
        except (ValueError, TypeError):
            return None
        if not current:
            return None
        if slot.name:
            current = self._typed(current, slot.name)
        safe = stable_json_prefix(current, slot.string_keys)
        if not safe or safe == slot.streamed or not safe.startswith(slot.streamed):
            return None
        piece = safe[len(slot.streamed) :]
        slot.streamed = safe
        return piece

    def _final_piece(self, slot: Slot) -> str | None:
        """At a call's end: the rest of its converted arguments."""
        if not self.converts:
            return None
        try:
            final = self.convert(slot.args, False)
        except (ValueError, TypeError):
            return None
        if final:
            final = self._typed(final, slot.name)
        if len(final) <= len(slot.streamed) or not final.startswith(slot.streamed):
            return None
        piece = final[len(slot.streamed) :]
        slot.streamed = final
        return piece

    # ---- whole -------------------------------------------------------------------------------------

    def calls(self) -> list[ParsedCall]:
        """The calls assembled from all events."""
        out: list[ParsedCall] = []
        for slot in self.slots:
            if not slot.name and not slot.args:
                continue
            name = slot.name.strip()
            body = slot.args
            if not name and body.strip():
                name, args = self.whole_name_and_args(body)
            elif not body.strip():
                args = "{}"
            elif self.converts:
                try:
                    args = self.convert(body, False)
                except (ValueError, TypeError):
                    args = self.whole_args(body, name)
            else:
                args = self.whole_args(body, name)
            if self.accept_name(name):
                if not slot.id:
                    slot.id = self.new_id()
                out.append(ParsedCall(name=name, arguments=self._typed(args, name), id=slot.id))
        return out

    def whole(self, events: list[Event]) -> tuple[str | None, str | None, list[ParsedCall]]:
        """(reasoning, content, calls) of a whole output's events (content stripped when there are calls)."""
        delta = self.delta(events, finished=True)
        calls = self.calls()
        reasoning = (delta.reasoning or "").rstrip() or None if delta is not None else None
        content = delta.content if delta is not None else None
        if content and calls:
            content = content.strip() or None
        return reasoning, content, calls


class MarkupToolParser(ToolParser):
    """A tool parser that is a `MarkupEngine` plus a `CallAssembler` (set by the subclass's __init__).

    Two settings depend on how the parser is composed, which vLLM's serving layer sets and the `ToolParser`
    interface does not carry: `reasoning_markup_is_text` (True, vLLM's default for a tool parser without a
    reasoning parser: reasoning markers stay content; a composer running a reasoning parser first sets it
    False, and the tool parser then reads reasoning markup after the reasoning phase as reasoning) and
    `suppress_calls` (vLLM's tool_choice "none" with tools: calls are dropped rather than assembled, which
    changes how the content around them is trimmed).
    """

    engine_based = True
    keeps_special_tokens = True  # vLLM's engine parsers detokenize with special tokens kept
    _engine: MarkupEngine
    _calls: CallAssembler

    @property
    def reasoning_markup_is_text(self) -> bool:
        return self._engine.skip_reasoning

    @reasoning_markup_is_text.setter
    def reasoning_markup_is_text(self, value: bool) -> None:
        self._engine.skip_reasoning = value

    @property
    def suppress_calls(self) -> bool:
        return self._calls.suppress

    @suppress_calls.setter
    def suppress_calls(self, value: bool) -> None:
        self._calls.suppress = value

    def extract(self, text: str) -> ExtractedToolCalls:
        self._engine.reset()
        self._calls.reset()
        events = self._engine.feed(text, ())
        events += self._engine.finish()
        _, content, calls = self._calls.whole(events)
        return ExtractedToolCalls(called=bool(calls), calls=calls, content=content)

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        return self._calls.trim_reasoning(self._calls.delta(self._engine.feed(delta_text, delta_token_ids)))

    def finish(self) -> MessageDelta | None:
        events = self._engine.finish()
        if not events and not self._calls.content.held:
            return None
        return self._calls.delta(events, finished=True)
