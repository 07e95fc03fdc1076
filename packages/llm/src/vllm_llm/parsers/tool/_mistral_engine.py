"""The marker engine behind vLLM's Mistral and Granite parsers (vLLM's `vllm/parser/engine`).

A `Grammar` names marker literals ("terminals") and a state machine over them. Output text passes three
stages, streamed or whole alike:

1. Token ids (`_mistral_lexing.Scanner`): a terminal the grammar marks `by_token` is recognised by its token
   id when ids come with the text; once any id was seen, the same literal spelled in plain text is just text.
   Special tokens of the tokenizer that the grammar does not use are dropped.
2. Text (`_mistral_lexing.Lexer`): literals are cut out of the text; a tail that may still grow into a
   literal (`[TOO`) is held back until the next chunk decides.
3. States (`MarkupEngine`): content, reasoning, tool name, tool arguments. Terminals move between states and
   emit `Event`s; other text becomes an event of the current state. JSON arguments stream character by
   character, a top-level closing brace or bracket held back until the next character (or the end) shows
   more follows. `Grammar.array_body` reads the arguments region as Granite's JSON array of call objects
   instead: one call per element, the array's `]` ending the region.

`vllm_llm.parsers.tool._mistral_calls` turns the events into message deltas and calls.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from vllm_llm.parsers.tool._call_deltas import Ev
from vllm_llm.parsers.tool._mistral_lexing import DROP, Lexer, Piece, Scanner
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["TOOL_STATES", "Ev", "Event", "Grammar", "MarkupEngine", "Move", "State"]


class State(enum.Enum):
    CONTENT = "content"
    REASONING = "reasoning"
    TOOL_NAME = "tool_name"
    TOOL_ARGS = "tool_args"


TOOL_STATES = frozenset({State.TOOL_NAME, State.TOOL_ARGS})
_PLAIN_STATES = frozenset({State.CONTENT, State.REASONING})


_STATE_TEXT = {
    State.CONTENT: Ev.TEXT,
    State.REASONING: Ev.REASONING,
    State.TOOL_NAME: Ev.NAME,
    State.TOOL_ARGS: Ev.ARGS,
}


class Event(NamedTuple):
    kind: Ev
    value: str
    call: int
    """The tool call the event belongs to (-1 before the first)."""
    tokens: int = 0
    """Tokens the event's text counts as (reasoning tokens are counted by these)."""


class Move(NamedTuple):
    """A terminal's transition: the next state and the events it emits (carrying the terminal's text)."""

    to: State
    emits: tuple[Ev, ...] = ()


@dataclass(frozen=True)
class Grammar:
    """One output format. The grammars here have no terminal that leaves the tool states."""

    terminals: Mapping[str, str]
    """Terminal name → literal."""
    moves: Mapping[tuple[State, str], Move]
    by_token: frozenset[str] = frozenset()
    """Terminals also recognised by token id (the format's single special tokens)."""
    array_body: bool = False
    """The tool region is a JSON array of `{"name": ..., "arguments": ...}` calls (Granite)."""

    @cached_property
    def tool_terminals(self) -> frozenset[str]:
        """Terminals of moves into or within the tool states (plain text when tool parsing is skipped)."""
        return frozenset(t for (src, t), m in self.moves.items() if src in TOOL_STATES or m.to in TOOL_STATES)

    @cached_property
    def reasoning_markup(self) -> frozenset[str]:
        """Reasoning-only markers (plain text when reasoning parsing is skipped); none when any of them also
        serves other structure."""
        markers = frozenset(
            t
            for (src, t), m in self.moves.items()
            if State.REASONING in (src, m.to) and m.to not in TOOL_STATES
        )
        reasoning_events = {Ev.REASONING_END}
        for (src, t), m in self.moves.items():
            if t in markers and (
                src not in _PLAIN_STATES
                or m.to not in _PLAIN_STATES
                or not reasoning_events.issuperset(m.emits)
            ):
                return frozenset()
        return markers


class MarkupEngine:
    """The state machine of one grammar over one output (streamed with `feed`/`finish`, or whole)."""

    def __init__(
        self,
        grammar: Grammar,
        tokenizer: TextTokenizer,
        *,
        skip_tools: bool = False,
        skip_reasoning: bool = False,
    ) -> None:
        self.grammar = grammar
        self.skip_tools = skip_tools
        """Tool markup stays text (the reasoning pass: a tool call start still ends reasoning)."""
        self.skip_reasoning = skip_reasoning
        """Reasoning markup stays text (no reasoning parser is configured)."""
        literals = {lit: name for name, lit in grammar.terminals.items()}
        by_id: dict[int, str] = {}
        for name in grammar.by_token:
            tid = tokenizer.token_to_id(grammar.terminals[name])
            if tid is not None:
                by_id[tid] = name
        for tid in sorted(tokenizer.all_special_ids):
            text = tokenizer.added_tokens.get(tid)
            if text and text not in grammar.terminals.values():
                by_id[tid] = DROP
                literals[text] = DROP
        self._id_terminals = frozenset(by_id.values())
        self._scanner = Scanner(by_id, tokenizer)
        self._lexer = Lexer(literals)
        self.reset()

    def reset(self) -> None:
        self.state = State.CONTENT
        self.call = -1
        self.reasoning_tokens = 0
        """Tokens of the reasoning so far (as vLLM attributes tokens to text)."""
        self._ids_seen = False
        self._scanner.reset()
        self._lexer.reset()
        self._reset_args()
        self._array_open = self._in_element = False

    def _reset_args(self) -> None:
        self._args = ""
        self._depth = 0
        self._in_string = self._escape = False

    def feed(self, text: str, token_ids: Sequence[int]) -> list[Event]:
        if token_ids:
            self._ids_seen = True
        return self._counted(self._pieces(self._scanner.scan(text, token_ids)))

    def finish(self) -> list[Event]:
        """The end of the output: held-back text, and an open call or reasoning closed."""
        events = self._pieces(self._scanner.flush())
        events += self._lexed(self._lexer.flush())
        if self._args:
            events.append(Event(Ev.ARGS, self._args, self.call))
            self._args = ""
        if self.state in TOOL_STATES:
            open_call = self._in_element if self.grammar.array_body else True
            if open_call and self.call >= 0:
                events.append(Event(Ev.END, "", self.call))
            self.state = State.CONTENT
        elif self.state is State.REASONING:
            events.append(Event(Ev.REASONING_END, "", self.call))
            self.state = State.CONTENT
        return self._counted(events)

    def _counted(self, events: list[Event]) -> list[Event]:
        self.reasoning_tokens += sum(e.tokens for e in events if e.kind is Ev.REASONING)
        return events

    # ---- terminals and text ------------------------------------------------------------------------

    def _pieces(self, pieces: list[Piece]) -> list[Event]:
        events: list[Event] = []
        for piece in pieces:
            if piece.name is not None:
                events += self._lexed(self._lexer.flush())
                events += self._terminal(piece.name, piece.text, 0)
            elif piece.text:
                events += self._lexed(self._lexer.feed(piece.text, piece.token_texts, piece.tokens))
            elif piece.tokens:
                events += self._text("", piece.tokens)  # tokens whose text came earlier
        return events

    def _lexed(self, pieces: list[Piece]) -> list[Event]:
        strict = self._id_terminals if self._ids_seen else frozenset()
        events: list[Event] = []
        for name, text, _, tokens in pieces:
            if name is None or name in strict:
                if text:
                    events += self._text(text, tokens)
            else:
                events += self._terminal(name, text, tokens)
        return events

    def _terminal(self, name: str, value: str, tokens: int) -> list[Event]:
        move = self.grammar.moves.get((self.state, name))
        if move is None:
            return [] if name == DROP else self._text(value, tokens)
        if self.skip_reasoning and name in self.grammar.reasoning_markup:
            return self._text(value, tokens)
        if self.skip_tools and name in self.grammar.tool_terminals:
            if Ev.REASONING_END in move.emits:
                self.state = State.CONTENT
                return [Event(Ev.REASONING_END, value, self.call), Event(Ev.TEXT, value, self.call)]
            return [Event(_STATE_TEXT[self.state], value, self.call)]
        events: list[Event] = []
        if self.state is State.TOOL_ARGS and move.to is not State.TOOL_ARGS and self._args:
            events.append(Event(Ev.ARGS, self._args, self.call))
            self._args = ""
        self.state = move.to
        for kind in move.emits:
            if kind is Ev.START:
                self.call += 1
            if kind is Ev.TEXT and not value:
                continue
            events.append(Event(kind, value, self.call, tokens))
        if self.state is State.TOOL_ARGS:
            self._depth = 0
            self._in_string = self._escape = False
            self._array_open = self._in_element = False
        return events

    def _text(self, text: str, tokens: int = 0) -> list[Event]:
        if self.state is not State.TOOL_ARGS:
            return [Event(_STATE_TEXT[self.state], text, self.call, tokens)]
        events: list[Event] = []
        if not self.grammar.array_body:
            for ch in text:
                events += self._args_char(ch)
            return events
        for i, ch in enumerate(text):
            if self.state is not State.TOOL_ARGS:  # the array closed: the rest is content
                return events + self._text(text[i:])
            events += self._array_char(ch)
        return events

    # ---- JSON arguments ----------------------------------------------------------------------------

    def _args_char(self, ch: str) -> list[Event]:
        """One argument character; everything buffered goes out unless it is a top-level closer."""
        self._args += ch
        if self._escape:
            self._escape = False
        elif self._in_string:
            if ch == "\\":
                self._escape = True
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
        chunk, self._args = self._args, ""
        return [Event(Ev.ARGS, chunk, self.call)]

    def _array_char(self, ch: str) -> list[Event]:
        """One character of a JSON array of calls: `[`, `{...}` elements (each one call), `,`, `]`."""
        if self._in_element:
            events = self._args_char(ch)
            if ch == "}" and not self._in_string and not self._escape and self._depth == 0:
                self._in_element = False
                if self._args:
                    events.append(Event(Ev.ARGS, self._args, self.call))
                    self._args = ""
                events.append(Event(Ev.END, "", self.call))
            return events
        if ch in " \t\r\n":
            return []
        if not self._array_open:
            if ch == "[":
                self._array_open = True
                return []
            return self._leave_array(ch)
        if ch == ",":
            return []
        if ch == "{":
            self.call += 1
            self._reset_args()
            self._in_element = True
            return [Event(Ev.START, "", self.call), *self._args_char(ch)]
        if ch == "]":
            self.state = State.CONTENT
            self._array_open = False
            return []
        return self._leave_array(ch)

    def _leave_array(self, ch: str) -> list[Event]:
        """The marker is not followed by a JSON array: back to content."""
        self.state = State.CONTENT
        self._array_open = self._in_element = False
        return self._text(ch)
