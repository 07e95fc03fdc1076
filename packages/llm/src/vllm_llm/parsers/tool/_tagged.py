"""Tag-delimited tool calls (Qwen3-Coder's `<function=…>`, GLM's `<arg_key>`): vLLM's engine-based
parsers (`vllm/parser/engine`) in small, shared by the formats' state machines.

A format declares its tags (literal strings), and the moves a tag makes from a state. The text between
tags belongs to the state it falls in: content, the current call's name, its raw arguments, or nothing
(markup). A tag with no move from the current state is text of that state; special tokens that are not
tags are dropped. Tags arriving split across deltas are held back until they are whole or cannot be.
While streamed, the tags that are single tokens of the vocabulary count only as those tokens (the same
text spelled by other tokens is plain text).

The raw arguments of a call become a JSON object by the format's converter, are typed by the tool's schema
and stream as far as they are stable: values but the last once they are followed by another, the last
value only while it is a string of a string-only parameter. The rest is sent when the call ends, if it
still extends what was sent (else the stream keeps what it sent, as vLLM's does).

Content follows vLLM's accounting: whitespace-only content before the first call is held back (dropped once
a call started), and text arriving in a step after a call's markup is held until a step that carries no
call pieces; in a whole output such text after the calls is lost when calls were found. Content is stripped
when calls were found.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from vllm_llm.parsers._base import (
    ExtractedToolCalls,
    MessageDelta,
    ParsedCall,
    ToolCallDelta,
    ToolParser,
    random_tool_call_id,
)
from vllm_llm.parsers.tool._arg_types import (
    has_tool,
    streamable_string_keys,
    tool_properties,
    typed_arguments,
)
from vllm_llm.parsers.tool._call_deltas import (
    DeltaContent,
    Ev,
    json_call,
    name_in_arguments,
    stable_json_prefix,
)
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = [
    "ARGS",
    "BETWEEN",
    "CONTENT",
    "NAME",
    "PREAMBLE",
    "REASONING",
    "Ev",
    "Grammar",
    "TagScanner",
    "TaggedToolParser",
]

# States. Text in CONTENT is content, in REASONING reasoning, in NAME the call's name, in ARGS its raw
# arguments; PREAMBLE (inside a call's wrapper, before its function) and BETWEEN (after a function, before
# the wrapper closes) drop text.
CONTENT = "content"
REASONING = "reasoning"
PREAMBLE = "preamble"
NAME = "name"
ARGS = "args"
BETWEEN = "between"
_CALL_STATES = frozenset((PREAMBLE, NAME, ARGS, BETWEEN))

_DROP = "__drop__"
"""The tag name of special tokens that are not tags of the format."""


_STATE_TEXT = {CONTENT: Ev.TEXT, REASONING: Ev.REASONING, NAME: Ev.NAME, ARGS: Ev.ARGS}

Move = tuple[str, tuple[Ev, ...]]
"""The next state and what the tag means (ARGS: the tag's text joins the raw arguments)."""
Event = tuple[Ev, str, int]
"""(meaning, text, call index)."""


@dataclass(frozen=True)
class Grammar:
    """A format: its tags by name, the tags matched by token id while streaming, the moves, and the moves of
    reasoning markup (which apply only when reasoning markup is not text, see `reasoning_markup_is_text`)."""

    tags: Mapping[str, str]
    token_tags: frozenset[str]
    moves: Mapping[tuple[str, str], Move]
    reasoning_moves: Mapping[tuple[str, str], Move]


class TagScanner:
    """Splits text into tags and plain text, holding back text that may still become a tag."""

    def __init__(self, tags: Mapping[str, str]) -> None:
        self._tags = dict(tags)  # literal text -> tag name
        self._firsts = frozenset(text[0] for text in self._tags)
        self._prefixes = frozenset(text[:i] for text in self._tags for i in range(1, len(text)))
        self._buffer = ""

    def reset(self) -> None:
        self._buffer = ""

    def feed(self, text: str) -> list[tuple[str | None, str]]:
        """(tag name or None for text, text) pieces now certain."""
        self._buffer += text
        return self._drain(final=False)

    def flush(self) -> list[tuple[str | None, str]]:
        """Everything held, as nothing more will come."""
        pieces = self._drain(final=True)
        if self._buffer:
            pieces.append((None, self._buffer))
            self._buffer = ""
        return pieces

    def _drain(self, *, final: bool) -> list[tuple[str | None, str]]:
        pieces: list[tuple[str | None, str]] = []
        while self._buffer:
            buffer = self._buffer
            if self._firsts.isdisjoint(buffer):
                pieces.append((None, buffer))
                self._buffer = ""
                break
            if not final and buffer in self._prefixes:
                break  # may still become a tag
            tag = max((t for t in self._tags if buffer.startswith(t)), key=len, default=None)
            if tag is not None:
                pieces.append((self._tags[tag], tag))
                self._buffer = buffer[len(tag) :]
                continue
            end = self._text_end(buffer)
            pieces.append((None, buffer[:end]))
            self._buffer = buffer[end:]
        return pieces

    def _text_end(self, buffer: str) -> int:
        """Where plain text ends: the first later position a tag (or the start of one) begins at."""
        for i in range(1, len(buffer)):
            if buffer[i] in self._firsts:
                rest = buffer[i:]
                if any(rest[: len(tag)] == tag[: len(rest)] for tag in self._tags):
                    return i
        return len(buffer)


class _Call:
    __slots__ = ("arguments", "id", "keys", "name", "named", "sent")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments = ""  # raw, as the format spells them
        self.named = False  # the name was sent
        self.keys: set[str] | None = None  # string-only parameters (None: no schema)
        self.sent = ""  # the JSON arguments sent so far


class TaggedToolParser(ToolParser):
    """A tag-delimited format; subclasses give the grammar and the converter of raw arguments.

    Two settings depend on how the parser is composed, which vLLM's serving layer sets and the `ToolParser`
    interface does not carry (named as `vllm_llm.parsers.tool._mistral_calls.MarkupToolParser`'s):
    `reasoning_markup_is_text` (True, vLLM's setting for a tool parser without a reasoning parser: `<think>`
    tags stay text; a composer running a reasoning parser first sets it False, and reasoning markup after the
    reasoning phase is then read as reasoning: a stray `</think>` disappears, GLM's `<think>` opens
    reasoning again) and `suppress_calls` (vLLM's tool_choice "none" with tools: calls are not assembled,
    their markup just disappears from the content, which changes how the content around it is trimmed).
    """

    grammar: ClassVar[Grammar]
    checks_names: ClassVar[bool] = False
    """Calls of tools the request does not have are ignored (when the request has tools)."""
    trims_reasoning: ClassVar[bool] = False
    """Trailing whitespace of streamed reasoning waits for more reasoning (and is dropped once it ended)."""
    engine_based = True
    keeps_special_tokens = True

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        grammar = self.grammar
        tag_texts = set(grammar.tags.values())
        self._token_tags: dict[int, tuple[str, str]] = {}
        for name in grammar.token_tags:
            token_id = tokenizer.token_to_id(grammar.tags[name])
            if token_id is not None:
                self._token_tags[token_id] = (name, grammar.tags[name])
        literals = {text: name for name, text in grammar.tags.items()}
        for token_id in tokenizer.all_special_ids:
            text = tokenizer.added_tokens.get(token_id)
            if text and text not in tag_texts:
                self._token_tags[token_id] = (_DROP, text)
                literals[text] = _DROP
        self._by_token = frozenset(name for name, _ in self._token_tags.values())
        self._scanner = TagScanner(literals)
        self.reasoning_markup_is_text = True
        self.suppress_calls = False
        self._reset()

    # ---- the format ----------------------------------------------------------------------------------

    @abc.abstractmethod
    def convert(self, raw: str, partial: bool) -> str:
        """The JSON object of a call's raw arguments (`partial`: they may be unfinished)."""

    def clean_name(self, name: str) -> str:
        """The name as sent (GLM strips it)."""
        return name

    # ---- whole ---------------------------------------------------------------------------------------

    def extract(self, text: str) -> ExtractedToolCalls:
        self._reset()
        delta = self._deliver([*self._scan(text, ()), *self._close()], finished=True)
        calls = self._whole_calls()
        content = delta.content if delta is not None else None
        if content and calls:
            content = content.strip() or None
        return ExtractedToolCalls(called=bool(calls), calls=calls, content=content)

    def _whole_calls(self) -> list[ParsedCall]:
        calls: list[ParsedCall] = []
        for call in self._calls:
            if not call.name and not call.arguments:
                continue
            name = call.name.strip()
            raw = call.arguments
            if not name and raw.strip():
                name, arguments = json_call(raw)
            elif raw.strip():
                arguments = self.convert(raw, False)
            else:
                arguments = "{}"
            if self._accepts(name):
                call.id = call.id or random_tool_call_id()
                calls.append(ParsedCall(name=name, arguments=self._typed(arguments, name), id=call.id))
        return calls

    # ---- streamed ------------------------------------------------------------------------------------

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        return self._trim_reasoning(self._deliver(self._scan(delta_text, delta_token_ids), finished=False))

    def finish(self) -> MessageDelta | None:
        events = self._close()
        if events or self._content.held:
            return self._deliver(events, finished=True)
        return None

    # ---- scanning: text to events --------------------------------------------------------------------

    def _reset(self) -> None:
        self._state = CONTENT
        self._index = -1
        self._streaming = False
        self._scanner.reset()
        self._waiting: list[tuple[str, str]] = []  # token tags whose text has not arrived yet
        self._waiting_text = ""
        self._calls: list[_Call] = []
        self._content = DeltaContent()
        self._reasoning_ended = False

    def _scan(self, text: str, token_ids: Sequence[int]) -> list[Event]:
        if token_ids:
            self._streaming = True
        marks = [*self._waiting, *(self._token_tags[t] for t in token_ids if t in self._token_tags)]
        text = self._waiting_text + text
        self._waiting, self._waiting_text = [], ""
        events: list[Event] = []
        for i, (name, tag) in enumerate(marks):
            at = text.find(tag)
            if at < 0:  # the detokenizer holds the token's text back: wait for it, and for what follows
                self._waiting, self._waiting_text = marks[i:], text
                return events
            events += self._pieces(self._scanner.feed(text[:at]) if at else [])
            events += self._pieces(self._scanner.flush())
            events += self._tag(name, tag)
            text = text[at + len(tag) :]
        if text:
            events += self._pieces(self._scanner.feed(text))
        return events

    def _close(self) -> list[Event]:
        events = self._pieces(self._scanner.feed(self._waiting_text)) if self._waiting_text else []
        for name, tag in self._waiting:
            events += self._pieces(self._scanner.flush())
            events += self._tag(name, tag)
        self._waiting, self._waiting_text = [], ""
        events += self._pieces(self._scanner.flush())
        if self._state in _CALL_STATES and self._index >= 0:
            events.append((Ev.END, "", self._index))
        elif self._state == REASONING:
            events.append((Ev.REASONING_END, "", self._index))
        self._state = CONTENT
        return events

    def _pieces(self, pieces: list[tuple[str | None, str]]) -> list[Event]:
        events: list[Event] = []
        for name, text in pieces:
            if name is None or (self._streaming and name in self._by_token):
                if text:
                    events += self._text(text)
            else:
                events += self._tag(name, text)
        return events

    def _tag(self, name: str, text: str) -> list[Event]:
        key = (self._state, name)
        move = self.grammar.moves.get(key)
        if move is None and not self.reasoning_markup_is_text:
            move = self.grammar.reasoning_moves.get(key)
        if move is None:
            return [] if name == _DROP else self._text(text)
        self._state, meanings = move
        events: list[Event] = []
        for meaning in meanings:
            if meaning is Ev.START:
                self._index += 1
            events.append((meaning, text, self._index))
        return events

    def _text(self, text: str) -> list[Event]:
        meaning = _STATE_TEXT.get(self._state)
        return [] if meaning is None else [(meaning, text, self._index)]

    # ---- accounting: events to deltas ----------------------------------------------------------------

    def _deliver(self, events: list[Event], *, finished: bool) -> MessageDelta | None:
        if not events and not self._content.held:
            return None
        return self._content.step(events, self, suppress=self.suppress_calls, finished=finished)

    # ---- call hooks (`CallHooks`) --------------------------------------------------------------------

    def on_start(self, index: int) -> None:
        while len(self._calls) <= index:
            self._calls.append(_Call())

    def on_name(self, index: int, text: str) -> None:
        self._calls[index].name += text

    def on_reasoning_end(self) -> None:
        self._reasoning_ended = True

    def has_calls(self) -> bool:
        return bool(self._calls)

    def _trim_reasoning(self, delta: MessageDelta | None) -> MessageDelta | None:
        if not self.trims_reasoning:
            return delta
        return self._content.trim_reasoning(delta, reasoning_ended=self._reasoning_ended)

    def on_arguments(self, index: int, text: str, pieces: list[ToolCallDelta]) -> None:
        call = self._calls[index]
        call.arguments += text
        if not call.named:
            if call.name:
                self._send_name(index, call.name, pieces)
            elif text:
                self._send_name(index, name_in_arguments(call.arguments), pieces)
        elif text:
            more = self._more_arguments(call)
            if more:
                pieces.append(ToolCallDelta(index=index, arguments=more))

    def _send_name(self, index: int, name: str | None, pieces: list[ToolCallDelta]) -> None:
        if name is None:
            return
        name = self.clean_name(name)
        if not self._accepts(name):
            return
        call = self._calls[index]
        self._name_call(call, name)
        pieces.append(ToolCallDelta(index=index, id=call.id, name=name))

    def _name_call(self, call: _Call, name: str) -> None:
        call.name = name
        call.named = True
        call.keys = streamable_string_keys(tool_properties(self.tools, name))
        call.id = call.id or random_tool_call_id()

    def on_end(self, index: int, pieces: list[ToolCallDelta]) -> None:
        if not 0 <= index < len(self._calls):
            return
        call = self._calls[index]
        call.name = self.clean_name(call.name)
        rest = self._rest_of_arguments(call)
        if not call.named:
            name = call.name or name_in_arguments(call.arguments) or ""
            if self._accepts(name):
                self._name_call(call, name)
                pieces.append(ToolCallDelta(index=index, id=call.id, name=name, arguments=rest or ""))
                return
        if rest and call.named:
            pieces.append(ToolCallDelta(index=index, arguments=rest))

    def _more_arguments(self, call: _Call) -> str | None:
        current = self.convert(call.arguments, True)
        if not current:
            return None
        if call.name:
            current = self._typed(current, call.name)
        stable = stable_json_prefix(current, call.keys)
        if not stable or stable == call.sent or not stable.startswith(call.sent):
            return None
        more, call.sent = stable[len(call.sent) :], stable
        return more

    def _rest_of_arguments(self, call: _Call) -> str | None:
        final = self.convert(call.arguments, False)
        if final:
            final = self._typed(final, call.name)
        if len(final) <= len(call.sent) or not final.startswith(call.sent):
            return None
        rest, call.sent = final[len(call.sent) :], final
        return rest

    # ---- tools ---------------------------------------------------------------------------------------

    def _accepts(self, name: str) -> bool:
        if not name:
            return False
        return not self.checks_names or not self.tools or has_tool(self.tools, name)

    def _typed(self, arguments: str, name: str) -> str:
        if not self.tools or not name:
            return arguments
        return typed_arguments(arguments, tool_properties(self.tools, name))
