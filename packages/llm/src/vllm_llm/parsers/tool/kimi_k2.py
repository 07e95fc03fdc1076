"""Kimi K2 tool calls (`--tool-call-parser kimi_k2`, vLLM's KimiK2ToolParser over its parser engine).

Calls sit in a section after any text; each call's header is Kimi's own call id, `functions.NAME:IDX`:

    Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0
    <|tool_call_argument_begin|>{"city": "Tokyo"}<|tool_call_end|><|tool_calls_section_end|>

The call id is carried as the call's id and NAME is its name. Once the section opens, nothing after it is
content. The whole-output arguments are the raw text stripped (`{}` when empty), their values coerced to
the tool's parameter types; streamed arguments are the raw text as it comes (a top-level closing brace
held until the next character). A call cut off before its arguments still counts (named by its header,
arguments `{}` whole, none streamed).

vLLM parses this with a declarative engine: token ids of the format's markers (special tokens) are
scanned first, the text between them is lexed for marker literals (held while it may still become one),
and a state machine turns markers and text into events. When streamed, markers count only as their token
ids; in a whole output, as text. Special tokens outside the format are dropped. This module follows that
engine for Kimi's grammar, with the engine's handling of content, names and ids.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

from vllm_llm.parsers._base import (
    ExtractedToolCalls,
    MessageDelta,
    ParsedCall,
    ToolCallDelta,
    ToolParser,
    random_tool_call_id,
)
from vllm_llm.parsers.tool._arg_types import tool_properties, typed_arguments
from vllm_llm.parsers.tool._call_deltas import DeltaContent, Ev, json_call, name_in_arguments
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["KimiK2ToolParser"]

_SECTION_BEGIN = "<|tool_calls_section_begin|>"
_SECTION_END = "<|tool_calls_section_end|>"
_CALL_BEGIN = "<|tool_call_begin|>"
_CALL_END = "<|tool_call_end|>"
_ARGS_BEGIN = "<|tool_call_argument_begin|>"
_THINK_BEGIN = "<think>"
_THINK_END = "</think>"
_DROP = "drop"
"""The terminal of a special token outside the format."""

#: Marker text → terminal. The think markers are terminals of vLLM's grammar too, but with no reasoning
#: parser before it (vLLM then sets skip_reasoning_parsing) they read as text wherever they occur.
_MARKERS: dict[str, str] = {
    _SECTION_BEGIN: "section_begin",
    _SECTION_END: "section_end",
    _CALL_BEGIN: "call_begin",
    _CALL_END: "call_end",
    _ARGS_BEGIN: "args_begin",
    _THINK_BEGIN: "think",
    _THINK_END: "think",
}


class _State(enum.Enum):
    CONTENT = enum.auto()
    SECTION = enum.auto()
    """In the section, outside a call (vLLM's TOOL_PREAMBLE)."""
    NAME = enum.auto()
    ARGS = enum.auto()
    BETWEEN = enum.auto()
    """In the section, after a call ended (vLLM's TOOL_BETWEEN)."""


#: (state, terminal) → (next state, event). Anything else is text of the state it occurs in.
_TRANSITIONS: dict[tuple[_State, str], tuple[_State, Ev | None]] = {
    (_State.CONTENT, "section_begin"): (_State.SECTION, None),
    (_State.SECTION, "call_begin"): (_State.NAME, Ev.START),
    (_State.NAME, "args_begin"): (_State.ARGS, None),
    (_State.ARGS, "call_end"): (_State.BETWEEN, Ev.END),
    (_State.ARGS, "section_end"): (_State.SECTION, Ev.END),
    (_State.BETWEEN, "call_begin"): (_State.NAME, Ev.START),
    (_State.SECTION, "section_end"): (_State.SECTION, None),  # the section never returns to content
    (_State.BETWEEN, "section_end"): (_State.SECTION, None),
}


class _Event(NamedTuple):
    kind: Ev
    value: str = ""
    call: int = -1
    """The index of the call it belongs to."""


class _Piece(NamedTuple):
    """Scanned or lexed output: a terminal with its text, or text (terminal None)."""

    terminal: str | None
    text: str


# ---- lexing -------------------------------------------------------------------------------------------


class _Lexer:
    """Text into marker literals and text, holding back text that may still become a literal."""

    def __init__(self, literals: Mapping[str, str]) -> None:
        self._literals = dict(literals)
        self._first = frozenset(text[0] for text in literals)
        self._prefixes = frozenset(text[:i] for text in literals for i in range(1, len(text)))
        self.buffer = ""

    def feed(self, text: str) -> list[_Piece]:
        if not self.buffer and self._first.isdisjoint(text):
            return [_Piece(None, text)]
        self.buffer += text
        return self._drain(final=False)

    def flush(self) -> list[_Piece]:
        pieces = self._drain(final=True) if self.buffer else []
        if self.buffer:
            pieces.append(_Piece(None, self.buffer))
            self.buffer = ""
        return pieces

    def _drain(self, *, final: bool) -> list[_Piece]:
        pieces: list[_Piece] = []
        while self.buffer:
            buffer = self.buffer
            if self._first.isdisjoint(buffer):
                pieces.append(_Piece(None, buffer))
                self.buffer = ""
                break
            if not final and buffer in self._prefixes:
                break  # a literal may still complete
            match = max((lit for lit in self._literals if buffer.startswith(lit)), key=len, default=None)
            if match is not None:
                pieces.append(_Piece(self._literals[match], match))
                self.buffer = buffer[len(match) :]
            else:
                end = self._text_end(buffer)
                pieces.append(_Piece(None, buffer[:end]))
                self.buffer = buffer[end:]
        return pieces

    def _text_end(self, buffer: str) -> int:
        """Where a literal may begin after the first character (or the end)."""
        for i in range(1, len(buffer)):
            if buffer[i] not in self._first:
                continue
            rest = buffer[i:]
            if any(rest[: len(lit)] == lit[: len(rest)] for lit in self._literals):
                return i
        return len(buffer)


class _Scanner:
    """Marker token ids of a delta as terminals, the text around them as text (vLLM's TokenIDScanner).

    A terminal whose text has not arrived in the delta text yet (held back by the detokenizer) waits for
    it in a later delta.
    """

    def __init__(self, tokenizer: TextTokenizer, terminals: Mapping[int, str]) -> None:
        self._tokenizer = tokenizer
        self._terminals = dict(terminals)
        self._texts: dict[int, str] = {}
        self.waiting: list[_Piece] = []
        self._waiting_text = ""

    def _text(self, token_id: int) -> str:
        if token_id not in self._texts:
            self._texts[token_id] = self._tokenizer.decode([token_id])
        return self._texts[token_id]

    def scan(self, delta_text: str, delta_ids: Sequence[int]) -> list[_Piece]:
        resolved: list[_Piece] = []
        text = delta_text
        if self.waiting:
            resolved, text = self._resolve(delta_text)
        if not any(tid in self._terminals for tid in delta_ids):
            if text:
                resolved.append(_Piece(None, text))
            return resolved
        pieces: list[_Piece] = []
        run: list[str] = []
        for tid in delta_ids:
            terminal = self._terminals.get(tid)
            if terminal is None:
                run.append(self._text(tid))
                continue
            if "".join(run):
                pieces.append(_Piece(None, "".join(run)))
            run = []
            pieces.append(_Piece(terminal, self._text(tid)))
        if "".join(run):
            pieces.append(_Piece(None, "".join(run)))
        if text:
            pieces = self._align(text, pieces)
        else:
            self.waiting.extend(p for p in pieces if p.terminal is not None)
            pieces = []
        return resolved + pieces

    def flush(self) -> list[_Piece]:
        pieces = [_Piece(None, self._waiting_text)] if self._waiting_text else []
        pieces.extend(self.waiting)
        self._waiting_text = ""
        self.waiting = []
        return pieces

    def _resolve(self, delta_text: str) -> tuple[list[_Piece], str]:
        waiting, self.waiting = self.waiting, []
        remaining = self._waiting_text + delta_text
        self._waiting_text = ""
        pieces: list[_Piece] = []
        for terminal in waiting:
            pos = remaining.find(terminal.text)
            if pos < 0:
                self._waiting_text += remaining
                remaining = ""
                self.waiting.append(terminal)
                continue
            if pos > 0:
                pieces.append(_Piece(None, remaining[:pos]))
            pieces.append(terminal)
            remaining = remaining[pos + len(terminal.text) :]
        return pieces, remaining

    def _align(self, text: str, pieces: list[_Piece]) -> list[_Piece]:
        """The pieces (from single-token decodes) placed in the delta text; text before them is text."""
        joined = "".join(p.text for p in pieces)
        if not joined:
            return [_Piece(None, text), *pieces]
        pos = text.find(joined)
        if pos == 0:
            return pieces
        if pos > 0:
            return [_Piece(None, text[:pos]), *pieces]
        return self._anchor(text, pieces)

    def _anchor(self, text: str, pieces: list[_Piece]) -> list[_Piece]:
        """Decodes in context differ: split the delta text at the terminals' texts, rightmost first."""
        anchors = [p for p in pieces if p.terminal is not None]
        positions = [-1] * len(anchors)
        end = len(text)
        for i in range(len(anchors) - 1, -1, -1):
            pos = text.rfind(anchors[i].text, 0, end)
            if pos >= 0:
                positions[i] = end = pos
        out: list[_Piece] = []
        done = 0
        for i, anchor in enumerate(anchors):
            pos = positions[i]
            if pos >= done:
                if pos > done:
                    out.append(_Piece(None, text[done:pos]))
                out.append(anchor)
                done = pos + len(anchor.text)
                continue
            later = any(p >= 0 for p in positions[i + 1 :])
            if not later and done < len(text) and anchor.terminal != _DROP:
                self._waiting_text += text[done:]
                done = len(text)
            self.waiting.append(anchor)
        if done < len(text):
            out.append(_Piece(None, text[done:]))
        return out


# ---- the state machine --------------------------------------------------------------------------------


class _Engine:
    """Markers and text into events, by Kimi's grammar (vLLM's StreamingParserEngine, tool phase)."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        by_id: dict[int, str] = {}
        for text, terminal in _MARKERS.items():
            tid = tokenizer.token_to_id(text)
            if tid is not None:
                by_id[tid] = terminal
        literals = dict(_MARKERS)
        for tid in tokenizer.all_special_ids:
            special = tokenizer.added_tokens.get(tid)
            if special and special not in _MARKERS:
                by_id[tid] = _DROP
                literals[special] = _DROP
        self._by_id_terminals = frozenset(by_id.values())
        self._scanner = _Scanner(tokenizer, by_id)
        self._lexer = _Lexer(literals)
        self._ids_seen = False
        self.state = _State.CONTENT
        self.index = -1
        self._args = ""
        """Arguments text not yet sent (a closing brace that may end the JSON)."""
        self._depth = 0
        self._in_string = False
        self._escaped = False

    def feed(self, delta_text: str, delta_ids: Sequence[int]) -> list[_Event]:
        if delta_ids:
            self._ids_seen = True
        return self._pieces(self._scanner.scan(delta_text, delta_ids))

    def finish(self) -> list[_Event]:
        events = self._pieces(self._scanner.flush())
        events += self._lexed(self._lexer.flush())
        if self._args:
            events.append(_Event(Ev.ARGS, self._args, self.index))
            self._args = ""
        if self.state is not _State.CONTENT:
            if self.index >= 0:
                events.append(_Event(Ev.END, call=self.index))
            self.state = _State.CONTENT
        return events

    def _pieces(self, pieces: list[_Piece]) -> list[_Event]:
        events: list[_Event] = []
        for piece in pieces:
            if piece.terminal is not None:
                events += self._lexed(self._lexer.flush())
                events += self._terminal(piece.terminal, piece.text)
            elif piece.text:
                events += self._lexed(self._lexer.feed(piece.text))
        return events

    def _lexed(self, pieces: list[_Piece]) -> list[_Event]:
        events: list[_Event] = []
        for terminal, text in pieces:
            # Once token ids are seen, markers count only as their token ids: lexed ones are text.
            if terminal is None or (self._ids_seen and terminal in self._by_id_terminals):
                if text:
                    events += self._text(text)
            else:
                events += self._terminal(terminal, text)
        return events

    def _terminal(self, terminal: str, text: str) -> list[_Event]:
        transition = _TRANSITIONS.get((self.state, terminal))
        if transition is None:
            return [] if terminal == _DROP else self._text(text)
        events: list[_Event] = []
        next_state, kind = transition
        if self.state is _State.ARGS and next_state is not _State.ARGS and self._args:
            events.append(_Event(Ev.ARGS, self._args, self.index))
            self._args = ""
        self.state = next_state
        if kind is Ev.START:
            self.index += 1
        if kind is not None:
            events.append(_Event(kind, text, self.index))
        if next_state is _State.ARGS:
            self._depth = 0
            self._in_string = self._escaped = False
        return events

    def _text(self, text: str) -> list[_Event]:
        if self.state is _State.CONTENT:
            return [_Event(Ev.TEXT, text, self.index)]
        if self.state is _State.NAME:
            return [_Event(Ev.NAME, text, self.index)]
        if self.state is _State.ARGS:
            return [event for ch in text for event in self._args_char(ch)]
        return []

    def _args_char(self, ch: str) -> list[_Event]:
        """Arguments stream as they come, but a closing brace that ends the JSON waits for what follows."""
        self._args += ch
        if self._escaped:
            self._escaped = False
        elif self._in_string:
            if ch == "\\":
                self._escaped = True
            elif ch == '"':
                self._in_string = False
        elif ch == '"':
            self._in_string = True
        elif ch in "{[":
            self._depth += 1
        elif ch in "}]":
            self._depth = max(self._depth - 1, 0)
            if self._depth == 0:
                return []
        sent, self._args = self._args, ""
        return [_Event(Ev.ARGS, sent, self.index)]


# ---- events into deltas and calls ---------------------------------------------------------------------


_CALL_ID = re.compile(r"(.+:\d+)")


def _read_header(header: str | None) -> tuple[str | None, str | None]:
    """(call id, name) of a call header `functions.NAME:IDX`, or Nones."""
    if header is None:
        return None, None
    match = _CALL_ID.match(header.strip())
    if match is None:
        return None, None
    call_id = match.group(1).strip()
    return call_id, call_id.split(":")[0].removeprefix("functions.")


class _Slot:
    __slots__ = ("arguments", "id", "name", "name_sent")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = ""
        self.name_sent = False


class _Calls:
    """Events into message deltas, and into whole calls (vLLM's ParserEngine with Kimi's overrides)."""

    def __init__(self) -> None:
        self.slots: list[_Slot] = []
        self.content = DeltaContent()

    def delta(self, events: list[_Event], *, finished: bool) -> MessageDelta | None:
        if not events and not self.content.held:
            return None
        return self.content.step(events, self, suppress=False, finished=finished)

    # ---- call hooks (`CallHooks`) ------------------------------------------------------------------

    def on_start(self, index: int) -> None:
        while len(self.slots) <= index:
            self.slots.append(_Slot())

    def on_name(self, index: int, text: str) -> None:
        self.slots[index].name += text

    def on_reasoning_end(self) -> None:
        pass  # no reasoning events here

    def has_calls(self) -> bool:
        return bool(self.slots)

    def _name(self, index: int, calls: list[ToolCallDelta], header: str | None) -> None:
        call_id, name = _read_header(header)
        slot = self.slots[index]
        if not name:
            slot.name = ""
            return
        slot.id = call_id or ""
        self._send_name(index, name, calls, arguments=None)

    def _send_name(self, index: int, name: str, calls: list[ToolCallDelta], arguments: str | None) -> None:
        slot = self.slots[index]
        slot.name = name
        slot.name_sent = True
        if not slot.id:
            slot.id = random_tool_call_id()
        calls.append(ToolCallDelta(index=index, id=slot.id, name=name, arguments=arguments))

    def on_arguments(self, index: int, text: str, calls: list[ToolCallDelta]) -> None:
        slot = self.slots[index]
        named_before = slot.name_sent
        slot.arguments += text
        if not slot.name_sent:
            if slot.name:
                self._name(index, calls, slot.name)
            elif text:
                self._name(index, calls, name_in_arguments(slot.arguments))
        elif text:
            calls.append(ToolCallDelta(index=index, arguments=text))
        if text and not named_before and slot.name_sent:
            calls.append(ToolCallDelta(index=index, arguments=text))

    def on_end(self, index: int, calls: list[ToolCallDelta]) -> None:
        if not 0 <= index < len(self.slots):
            return
        slot = self.slots[index]
        if slot.name_sent:
            return
        call_id, name = _read_header(slot.name)
        if name:
            slot.id = call_id or ""
            slot.name = name
        name = slot.name or name_in_arguments(slot.arguments) or ""
        if name:
            self._send_name(index, name, calls, arguments="")

    def parsed(self, tools: Sequence[Mapping[str, Any]]) -> list[ParsedCall]:
        """The whole calls, once all events went through `delta`."""
        parsed: list[ParsedCall] = []
        for slot in self.slots:
            if not slot.name and not slot.arguments:
                continue
            name = slot.name.strip()
            raw = slot.arguments.strip()
            if not name and raw:
                name, arguments = json_call(raw)
            else:
                arguments = raw or "{}"
            if not name:
                continue  # (and vLLM fails on a name that is not a string)
            if not slot.id:
                slot.id = random_tool_call_id()
            arguments = typed_arguments(arguments, tool_properties(tools, name, functions_only=True))
            parsed.append(ParsedCall(name=name, arguments=arguments, id=slot.id))
        return parsed


# ---- the parser ---------------------------------------------------------------------------------------


class KimiK2ToolParser(ToolParser):
    """`<|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}<|tool_call_end|>` in a section.

    vLLM's parser reads a following `</think>` differently when a reasoning parser runs before it (it then
    drops the marker from content); this one reads it as vLLM does without a reasoning parser (as text).
    """

    supports_required_and_named: ClassVar[bool] = False  # vLLM: a structural-tag model under strict tools
    structural_tag_model: ClassVar[str | None] = "kimi"
    engine_based: ClassVar[bool] = True
    keeps_special_tokens: ClassVar[bool] = True

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._engine = _Engine(tokenizer)
        self._calls = _Calls()

    def extract(self, text: str) -> ExtractedToolCalls:
        engine = _Engine(self.tokenizer)
        calls = _Calls()
        delta = calls.delta(engine.feed(text, ()) + engine.finish(), finished=True)
        parsed = calls.parsed(self.tools)
        content = delta.content if delta is not None else None
        if content and parsed and not content.strip():
            content = None
        return ExtractedToolCalls(called=bool(parsed), calls=parsed, content=content or None)

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        return self._calls.delta(self._engine.feed(delta_text, delta_token_ids), finished=False)

    def finish(self) -> MessageDelta | None:
        events = self._engine.finish()
        if events or self._calls.content.held:
            return self._calls.delta(events, finished=True)
        return None
