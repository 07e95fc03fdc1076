"""Shared `<think>…</think>` logic, in vLLM's two kinds.

`ThinkReasoningParser` (vLLM's BaseThinkingReasoningParser): whole, the text after the first start token (or
all of it, when the model leaves the start token to the chat template) up to the first end token is
reasoning, after it content, and without an end token everything is reasoning; streamed, token ids decide
(the start/end tokens must be single tokens of the vocabulary).

`EngineReasoningParser` (vLLM's parser-engine reasoning adapters): a small state machine over the output's
markers (`ThinkGrammar`), fed text and token ids alike; see `ThinkEngine`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from vllm_llm.parsers._base import MessageDelta, ReasoningParser, ReasoningStep
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = [
    "EngineReasoningParser",
    "Step",
    "ThinkEngine",
    "ThinkGrammar",
    "ThinkReasoningParser",
    "count_between",
    "split_think",
    "think_token_ids",
]


def think_token_ids(tokenizer: TextTokenizer, start: str, end: str, owner: str) -> tuple[int, int]:
    """The ids of the start and end tokens; ValueError when the vocabulary lacks either (vLLM refuses such
    a tokenizer at start-up)."""
    start_id = tokenizer.token_to_id(start)
    end_id = tokenizer.token_to_id(end)
    if start_id is None or end_id is None:
        raise ValueError(
            f"{owner} reasoning parser could not locate think start/end tokens in the tokenizer!"
        )
    return start_id, end_id


def split_think(text: str, start: str, end: str) -> tuple[str | None, str | None]:
    """(reasoning, content) of a whole output: an optional start token, reasoning, end token, content."""
    before, found, after = text.partition(start)
    rest = after if found else before
    if end not in rest:
        return rest, None
    reasoning, _, content = rest.partition(end)
    return reasoning, content or None


def count_between(token_ids: Sequence[int], start_id: int, end_id: int) -> int:
    """Tokens inside start/end spans, nesting counted and stray end tokens ignored (vLLM's
    count_reasoning_tokens)."""
    count = depth = 0
    for tid in token_ids:
        if tid == start_id:
            depth += 1
        elif tid == end_id:
            depth = max(depth - 1, 0)
        elif depth:
            count += 1
    return count


def _split_at_end(text: str, end: str) -> MessageDelta:
    """A delta holding the end token: reasoning before it, content after (vLLM slices at `find`, even when
    the token's text is missing)."""
    at = text.find(end)
    content = text[at + len(end) :]
    return MessageDelta(reasoning=text[:at], content=content or None)


class ThinkReasoningParser(ReasoningParser):
    """Reasoning in `<think>…</think>` (or other single start/end tokens); subclasses name the tokens."""

    start_token: str = "<think>"
    end_token: str = "</think>"

    def __init__(
        self, tokenizer: TextTokenizer, chat_template_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        self.start_id, self.end_id = think_token_ids(
            tokenizer, self.start_token, self.end_token, type(self).__name__
        )
        self._start_seen = False
        self._end_seen = False
        """Whether an earlier delta of the stream held the start / end token."""

    def extract(self, text: str) -> tuple[str | None, str | None]:
        return split_think(text, self.start_token, self.end_token)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """The last start or end token in `token_ids` is an end token."""
        for tid in reversed(token_ids):
            if tid == self.start_id:
                return False
            if tid == self.end_id:
                return True
        return False

    def content_ids(self, delta_token_ids: Sequence[int]) -> list[int]:
        """The ids after the end token, when it is not the delta's last (vLLM's extract_content_ids)."""
        ids = list(delta_token_ids)
        if self.end_id not in ids[:-1]:
            return []
        return ids[ids.index(self.end_id) + 1 :]

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        delta = self.stream_delta(delta_text, delta_token_ids)
        self._start_seen = self._start_seen or self.start_id in delta_token_ids
        self._end_seen = self._end_seen or self.end_id in delta_token_ids
        ended = self.end_id in delta_token_ids
        return ReasoningStep(
            delta=delta, ended=ended, content_token_ids=self.content_ids(delta_token_ids) if ended else []
        )

    def stream_delta(self, delta_text: str, delta_ids: Sequence[int]) -> MessageDelta | None:
        """vLLM's BaseThinkingReasoningParser.extract_reasoning_streaming: a lone start/end token is
        dropped; with the start token seen earlier, text is reasoning up to the end token and content
        after; with the start token in this delta, the reasoning is what lies between; without any start
        token, the whole text is content."""
        if len(delta_ids) == 1 and delta_ids[0] in (self.start_id, self.end_id):
            return None
        if self._start_seen:
            return self.after_start(delta_text, delta_ids)
        if self.start_id in delta_ids:
            if self.end_id in delta_ids:
                start = delta_text.find(self.start_token)
                end = delta_text.find(self.end_token)
                content = delta_text[end + len(self.end_token) :]
                return MessageDelta(
                    reasoning=delta_text[start + len(self.start_token) : end], content=content or None
                )
            return MessageDelta(reasoning=delta_text)
        return self.without_start(delta_text, delta_ids)

    def after_start(self, delta_text: str, delta_ids: Sequence[int]) -> MessageDelta:
        """Text after the start token: reasoning up to the end token, content after it."""
        if self.end_id in delta_ids:
            return _split_at_end(delta_text, self.end_token)
        if self._end_seen:
            return MessageDelta(content=delta_text)
        return MessageDelta(reasoning=delta_text)

    def without_start(self, delta_text: str, delta_ids: Sequence[int]) -> MessageDelta | None:
        """Text while no start token has been seen: content (a subclass may read it as reasoning)."""
        return MessageDelta(content=delta_text)

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        return count_between(token_ids, self.start_id, self.end_id)


# ---- the parser engine ---------------------------------------------------------------------------------
#
# vLLM's engine-based parsers (qwen3, glm45, minimax_m2) read reasoning with one declarative state machine
# that also knows the tool-call markers: the output is cut into markers ("terminals") and text, by token id
# for markers that are single tokens and by text otherwise, and each marker moves the state. The reasoning
# parser runs it with tool parsing off (tool markers stay text); counting reasoning tokens runs it with tool
# parsing on. What follows is that machine, as far as reasoning shows it.

CONTENT = "content"
REASONING = "reasoning"
TOOL_PREAMBLE = "tool_preamble"
TOOL_NAME = "tool_name"
TOOL_ARGS = "tool_args"
TOOL_BETWEEN = "tool_between"
_TOOL_STATES = frozenset({TOOL_PREAMBLE, TOOL_NAME, TOOL_ARGS, TOOL_BETWEEN})

# Events (what a stretch of output means).
TEXT = "text"
THOUGHT = "reasoning"
REASONING_START = "reasoning_start"
REASONING_END = "reasoning_end"
CALL_START = "call_start"
CALL_END = "call_end"
ARGS = "args"
NAME = "name"

_CONTENT_EVENTS = {CONTENT: TEXT, REASONING: THOUGHT, TOOL_NAME: NAME, TOOL_ARGS: ARGS}
_LEXED_TEXT = "__content__"
_DROP = "__drop__"


class Step(NamedTuple):
    """A transition: the next state and the events it emits."""

    to: str
    events: tuple[str, ...] = ()


@dataclass(frozen=True)
class ThinkGrammar:
    """A format: its markers, which of them are read by token id, and its transitions."""

    terminals: Mapping[str, str]
    """name → literal text."""
    token_terminals: Mapping[str, str]
    """name → token text, for the markers matched by token id."""
    transitions: Mapping[tuple[str, str], Step]
    initial: str
    wait_for_reasoning: bool
    """Whether output starts inside reasoning unless the prompt closed it."""
    turn_boundaries: frozenset[str] = frozenset()
    strip_trailing_reasoning: bool = True

    @property
    def has_reasoning(self) -> bool:
        return (
            "THINK_END" in self.token_terminals
            or "THINK_START" in self.terminals
            or "THINK_END" in self.terminals
            or self.initial == REASONING
        )


class _Event(NamedTuple):
    kind: str
    value: str = ""
    tokens: int = 0


class _Lexeme(NamedTuple):
    terminal: str
    value: str
    tokens: int = 0


class _Chunk(NamedTuple):
    """Text between markers, with the texts of its tokens (each decoded alone) and their number."""

    text: str
    token_texts: tuple[str, ...] = ()
    tokens: int = 0


class _Marker(NamedTuple):
    """A marker found by token id."""

    terminal: str
    text: str


def _char_token_counts(text: str, token_texts: Sequence[str], tokens: int) -> list[int]:
    """Tokens per character: each token at the first place its text is found (the rest at the start)."""
    counts = [0] * len(text)
    if not text:
        return counts
    if token_texts:
        pos = assigned = 0
        for token_text in token_texts:
            found = text.find(token_text, pos) if token_text else -1
            if found < 0:
                continue
            counts[found] += 1
            assigned += 1
            pos = found + len(token_text)
        if tokens > assigned:
            counts[0] += tokens - assigned
    elif tokens:
        counts[0] = tokens
    return counts


class _Lexer:
    """Cuts text into literal markers and content, holding back what may begin a marker."""

    def __init__(self, literals: Sequence[tuple[str, str]]) -> None:
        self.literals = sorted(literals, key=lambda lit: -len(lit[0]))
        self.first_chars = frozenset(text[0] for text, _ in self.literals if text)
        self.prefixes = frozenset(text[:i] for text, _ in self.literals for i in range(1, len(text)))
        self.buffer = ""
        self._counts: list[int] = []

    def feed(self, text: str, token_texts: Sequence[str] = (), tokens: int = 0) -> list[_Lexeme]:
        counts = _char_token_counts(text, token_texts, tokens)
        if not self.buffer and self.first_chars and self.first_chars.isdisjoint(text):
            return [_Lexeme(_LEXED_TEXT, text, sum(counts))]
        self.buffer += text
        self._counts.extend(counts)
        return self._drain(final=False)

    def flush(self) -> list[_Lexeme]:
        out = self._drain(final=True) if self.buffer else []
        if self.buffer:
            out.append(_Lexeme(_LEXED_TEXT, self.buffer, self._take(len(self.buffer))))
        return out

    def _take(self, length: int) -> int:
        taken = sum(self._counts[:length])
        del self._counts[:length]
        self.buffer = self.buffer[length:]
        return taken

    def _drain(self, *, final: bool) -> list[_Lexeme]:
        out: list[_Lexeme] = []
        while self.buffer:
            if self.first_chars.isdisjoint(self.buffer):
                out.append(_Lexeme(_LEXED_TEXT, self.buffer, self._take(len(self.buffer))))
                break
            if self.buffer in self.prefixes and not final:
                break  # may still become a (longer) marker
            match = next(((t, n) for t, n in self.literals if t and self.buffer.startswith(t)), None)
            if match is not None:
                out.append(_Lexeme(match[1], match[0], self._take(len(match[0]))))
                continue
            end = self._content_end()
            value = self.buffer[:end]
            out.append(_Lexeme(_LEXED_TEXT, value, self._take(end)))
        return out

    def _content_end(self) -> int:
        buf = self.buffer
        for i in range(1, len(buf)):
            if buf[i] not in self.first_chars:
                continue
            for text, _ in self.literals:
                n = min(len(buf) - i, len(text))
                if buf[i : i + n] == text[:n]:
                    return i
        return len(buf)


class _Scanner:
    """Finds the markers read by token id in a delta and splits its text around them; a marker whose text
    has not arrived yet (held back by the detokenizer) waits for it."""

    def __init__(self, by_id: Mapping[int, str], tokenizer: TextTokenizer) -> None:
        self.by_id = by_id
        self.tokenizer = tokenizer
        self._decoded: dict[int, str] = {}
        self.waiting: list[_Marker] = []
        self._waiting_counts: list[int] = []
        self._trailing = 0
        self._post_text = ""

    def _decode(self, tid: int) -> str:
        text = self._decoded.get(tid)
        if text is None:
            text = self._decoded[tid] = self.tokenizer.decode([tid])
        return text

    def scan(self, text: str, ids: Sequence[int]) -> list[_Chunk | _Marker]:
        prefix: list[_Chunk | _Marker] = []
        trailing = 0
        if self.waiting:
            prefix, text, trailing = self._resolve_waiting(text, len(ids))
        if not any(tid in self.by_id for tid in ids):
            if text:
                token_texts = tuple(self._decode(t) for t in ids)
                prefix.append(_Chunk(text, token_texts, (trailing if prefix else 0) + len(token_texts)))
            return prefix
        items: list[_Chunk | _Marker] = []
        run: list[str] = []
        for tid in ids:
            terminal = self.by_id.get(tid)
            if terminal is None:
                run.append(self._decode(tid))
                continue
            if "".join(run):
                items.append(_Chunk("".join(run), tuple(run), len(run)))
            run = []
            items.append(_Marker(terminal, self._decode(tid)))
        if "".join(run):
            items.append(_Chunk("".join(run), tuple(run), len(run)))
        if trailing:
            items.insert(0, _Chunk("", tokens=trailing))
        if text:
            items = self._recover_held_back(text, items)
        else:
            # No text to check the tokens against: wait for it before moving the state.
            count = 0
            for item in items:
                if isinstance(item, _Chunk):
                    count += item.tokens
                else:
                    self.waiting.append(item)
                    self._waiting_counts.append(count)
                    count = 0
            self._trailing += count
            items = []
        return prefix + items

    def flush(self) -> list[_Chunk | _Marker]:
        if not self.waiting and not self._post_text:
            return []
        out: list[_Chunk | _Marker] = []
        if self._post_text:
            out.append(_Chunk(self._post_text, tokens=self._waiting_counts[0] if self._waiting_counts else 0))
            self._post_text = ""
        out.extend(self.waiting)
        if self._trailing:
            out.append(_Chunk("", tokens=self._trailing))
        self.waiting, self._waiting_counts, self._trailing = [], [], 0
        return out

    def _resolve_waiting(self, text: str, delta_tokens: int) -> tuple[list[_Chunk | _Marker], str, int]:
        waiting, counts, trailing = self.waiting, self._waiting_counts, self._trailing
        self.waiting, self._waiting_counts, self._trailing = [], [], 0
        out: list[_Chunk | _Marker] = []
        rest = self._post_text + text
        self._post_text = ""
        for marker, count in zip(waiting, counts, strict=True):
            pos = rest.find(marker.text)
            if pos >= 0:
                if pos > 0:
                    out.append(_Chunk(rest[:pos], tokens=count))
                out.append(marker)
                rest = rest[pos + len(marker.text) :]
                continue
            if rest:
                self._post_text += rest
                count += delta_tokens
                rest = ""
            self.waiting.append(marker)
            self._waiting_counts.append(count)
        if self.waiting:
            self._trailing, trailing = trailing, 0
        return out, rest, trailing

    def _recover_held_back(self, text: str, items: list[_Chunk | _Marker]) -> list[_Chunk | _Marker]:
        """Text the detokenizer released late leads the delta; when the tokens decoded one by one do not
        spell the delta, the markers anchor the split instead."""
        if not items:
            return [_Chunk(text)]
        spelled = "".join(item.text for item in items)
        if not spelled:
            return [_Chunk(text), *items]
        pos = text.find(spelled)
        if pos > 0:
            return [_Chunk(text[:pos]), *items]
        if pos == 0:
            return items
        return self._rebuild_from_markers(text, items)

    def _rebuild_from_markers(self, text: str, items: list[_Chunk | _Marker]) -> list[_Chunk | _Marker]:
        markers = [item for item in items if isinstance(item, _Marker)]
        if not markers:
            return [_Chunk(text)]
        groups: list[list[str]] = [[] for _ in range(len(markers) + 1)]
        group_counts = [0] * (len(markers) + 1)
        g = 0
        for item in items:
            if isinstance(item, _Marker):
                g += 1
            else:
                groups[g].extend(item.token_texts)
                group_counts[g] += item.tokens
        # Each marker binds to the rightmost occurrence of its text before the next marker's.
        positions = [-1] * len(markers)
        end = len(text)
        for i in range(len(markers) - 1, -1, -1):
            pos = text.rfind(markers[i].text, 0, end)
            if pos >= 0:
                positions[i] = end = pos
        out: list[_Chunk | _Marker] = []
        done = 0
        for i, marker in enumerate(markers):
            pos = positions[i]
            if pos >= done:
                if pos > done:
                    out.append(_Chunk(text[done:pos], tuple(groups[i]), group_counts[i]))
                out.append(marker)
                done = pos + len(marker.text)
                continue
            later = any(p >= 0 for p in positions[i + 1 :])
            if not later and done < len(text) and marker.terminal != _DROP:
                self._post_text += text[done:]
                done = len(text)
            self.waiting.append(marker)
            self._waiting_counts.append(group_counts[i])
        if done < len(text):
            out.append(_Chunk(text[done:], tuple(groups[-1]), group_counts[-1]))
        return out


class ThinkEngine:
    """One pass of a `ThinkGrammar` over an output (vLLM's StreamingParserEngine, for these formats).

    With `skip_tools`, tool-call markers are text: one that opens a call out of reasoning ends the reasoning
    and stays in the content. Special tokens that are not markers are dropped. `reasoning_tokens` counts the
    tokens of the reasoning text seen so far.
    """

    def __init__(self, grammar: ThinkGrammar, tokenizer: TextTokenizer, *, skip_tools: bool) -> None:
        self.grammar = grammar
        self.skip_tools = skip_tools
        by_id: dict[int, str] = {}
        for name, text in grammar.token_terminals.items():
            tid = tokenizer.token_to_id(text)
            if tid is not None:
                by_id[tid] = name
        configured = set(grammar.token_terminals.values()) | set(grammar.terminals.values())
        drops = {
            tid: special
            for tid in tokenizer.all_special_ids
            if (special := tokenizer.added_tokens.get(tid)) is not None and special not in configured
        }
        by_id.update(dict.fromkeys(drops, _DROP))
        literals = [(text, name) for name, text in grammar.terminals.items()]
        literals += [(text, _DROP) for text in set(drops.values())]
        self._by_id_names = frozenset(by_id.values())
        self._special_ids = frozenset(by_id)
        self._scanner = _Scanner(by_id, tokenizer)
        self._lexer = _Lexer(literals)
        transitions = grammar.transitions.items()
        self._tool_terminals = frozenset(t for (s, t), step in transitions if _TOOL_STATES & {s, step.to})
        self._tool_exits = frozenset(
            t for (s, t), step in transitions if s in _TOOL_STATES and step.to not in _TOOL_STATES
        )
        self.state = grammar.initial
        self.reasoning_tokens = 0
        self._had_ids = False
        self._in_skipped_call = False

    def feed(self, text: str, ids: Sequence[int]) -> list[_Event]:
        if ids:
            self._had_ids = True
        if (
            text
            and not self._lexer.buffer
            and not self._scanner.waiting
            and self._lexer.first_chars.isdisjoint(text)
            and self._special_ids.isdisjoint(ids)
        ):
            return self._counted(self._emit(text, len(ids)))
        items = self._scanner.scan(text, ids)
        if len(items) == 1 and isinstance(items[0], _Chunk):
            chunk = items[0]
            lexemes = self._lexer.feed(chunk.text, chunk.token_texts, chunk.tokens)
            if len(lexemes) == 1 and lexemes[0].terminal == _LEXED_TEXT:
                return self._counted(self._emit(lexemes[0].value, lexemes[0].tokens))
            return self._counted(self._lexemes(lexemes))
        return self._counted(self._items(items))

    def finish(self) -> list[_Event]:
        events = self._items(self._scanner.flush())
        events += self._lexemes(self._lexer.flush())
        if self.state in _TOOL_STATES:
            events.append(_Event(CALL_END))
            self.state = CONTENT
        elif self.state == REASONING:
            events.append(_Event(REASONING_END))
            self.state = CONTENT
        return self._counted(events)

    def _counted(self, events: list[_Event]) -> list[_Event]:
        self.reasoning_tokens += sum(e.tokens for e in events if e.kind == THOUGHT)
        return events

    def _items(self, items: Sequence[_Chunk | _Marker]) -> list[_Event]:
        events: list[_Event] = []
        for item in items:
            if isinstance(item, _Marker):
                events += self._lexemes(self._lexer.flush())
                events += self._terminal(item.terminal, item.text, 0)
            elif not item.text and item.tokens:
                events += self._emit("", item.tokens)
            else:
                events += self._lexemes(self._lexer.feed(item.text, item.token_texts, item.tokens))
        return events

    def _lexemes(self, lexemes: Sequence[_Lexeme]) -> list[_Event]:
        # Once token ids flow, a marker read by token id is only a marker as that token: its text is text.
        by_id_only = self._by_id_names if self._had_ids else frozenset()
        events: list[_Event] = []
        for lex in lexemes:
            if lex.terminal == _LEXED_TEXT or lex.terminal in by_id_only:
                if lex.value:
                    events += self._emit(lex.value, lex.tokens)
            else:
                events += self._terminal(lex.terminal, lex.value, lex.tokens)
        return events

    def _emit(self, text: str, tokens: int) -> list[_Event]:
        kind = _CONTENT_EVENTS.get(self.state)
        return [_Event(kind, text, tokens)] if kind is not None else []

    def _terminal(self, terminal: str, value: str, tokens: int) -> list[_Event]:
        step = self.grammar.transitions.get((self.state, terminal))
        if step is None:
            if terminal == _DROP:
                return []
            if self.skip_tools and terminal in self._tool_exits:
                self._in_skipped_call = False
            return self._emit(value, tokens)
        if self.skip_tools and terminal in self._tool_terminals:
            opens = step.to in _TOOL_STATES
            exits = terminal in self._tool_exits
            if not (exits and not opens and not self._in_skipped_call):
                if opens:
                    self._in_skipped_call = True
                elif exits:
                    self._in_skipped_call = False
                if REASONING_END in step.events:
                    self.state = CONTENT
                    return [_Event(REASONING_END, value), _Event(TEXT, value)]
                kind = _CONTENT_EVENTS.get(self.state)
                return [_Event(kind, value)] if kind is not None else []
        self.state = step.to
        return [_Event(kind, value, tokens) for kind in step.events]


class EngineReasoningParser(ReasoningParser):
    """Reasoning read by a `ThinkEngine` (vLLM's ParserEngineReasoningAdapter); subclasses give the grammar.

    Whole: the engine over the text (tool markers as text); trailing whitespace of the reasoning stripped
    where the format says so. Streamed: the engine over each delta; whitespace-only content waits until
    something else comes; when reasoning ends the engine is flushed and what follows is content.
    """

    engine_based: ClassVar[bool] = True
    keeps_special_tokens: ClassVar[bool] = True
    """vLLM's adjust_request of these parsers sets skip_special_tokens=False."""

    def __init__(
        self, tokenizer: TextTokenizer, chat_template_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        self.grammar = self.make_grammar()
        grammar = self.grammar
        token_ids = {name: tokenizer.token_to_id(text) for name, text in grammar.token_terminals.items()}
        self._start_id = token_ids.get("THINK_START")
        self._end_id = token_ids.get("THINK_END")
        self._end_ids = self._reasoning_end_ids(token_ids)
        boundaries = (tokenizer.token_to_id(text) for text in grammar.turn_boundaries)
        self._boundary_ids = frozenset(tid for tid in boundaries if tid is not None)
        self._stream = ThinkEngine(grammar, tokenizer, skip_tools=True)
        self._streamed = False
        self._ended = not grammar.has_reasoning
        self._held_content = ""
        self._held_reasoning = ""
        self._content_started = False

    def make_grammar(self) -> ThinkGrammar:
        raise NotImplementedError

    @property
    def separates_reasoning(self) -> bool:
        """False where the format reads all output as content whole (e.g. thinking switched off)."""
        return True

    def _reasoning_end_ids(self, token_ids: Mapping[str, int | None]) -> frozenset[int]:
        """Token ids that end reasoning: the markers whose transition out of reasoning ends it (none when
        reasoning can be left otherwise, or its end marker into content is not one token)."""
        ends: dict[str, str] = {}
        for (state, terminal), step in self.grammar.transitions.items():
            if state != REASONING:
                continue
            if REASONING_END in step.events:
                ends.setdefault(terminal, step.to)
            elif step.to != REASONING:
                return frozenset()
        found: set[int] = set()
        for terminal, to in ends.items():
            tid = token_ids.get(terminal)
            if tid is not None:
                found.add(tid)
            elif to == CONTENT:
                return frozenset()
        return frozenset(found)

    # ---- whole ----------------------------------------------------------------------------------------

    def extract(self, text: str) -> tuple[str | None, str | None]:
        self._streamed = False
        if not self.separates_reasoning:
            return None, text
        engine = ThinkEngine(self.grammar, self.tokenizer, skip_tools=True)
        events = engine.feed(text, ()) + engine.finish()
        reasoning = "".join(e.value for e in events if e.kind == THOUGHT)
        if self.grammar.strip_trailing_reasoning:
            reasoning = reasoning.rstrip()
        return reasoning or None, "".join(e.value for e in events if e.kind == TEXT) or None

    # ---- streamed -------------------------------------------------------------------------------------

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """The prompt's last reasoning marker in the current turn closes reasoning, or the format does not
        start in reasoning."""
        grammar = self.grammar
        opener = grammar.transitions.get((grammar.initial, "THINK_START"))
        start_opens = opener is not None and opener.to == REASONING
        for tid in reversed(token_ids):
            if tid in self._end_ids:
                return True
            if tid == self._start_id:
                if start_opens:
                    return False
                break
            if tid in self._boundary_ids:
                break
        return not grammar.wait_for_reasoning

    def content_ids(self, token_ids: Sequence[int]) -> list[int]:
        """The delta's ids after reasoning ended (vLLM's extract_content_ids): after the last end token,
        else from the first token that ended reasoning in the current turn."""
        ids = list(token_ids)
        if not self.grammar.wait_for_reasoning:
            return ids
        if self._end_id is not None and self._end_id in ids:
            return ids[len(ids) - ids[::-1].index(self._end_id) :]
        if self._end_ids:
            start = 0
            for i in range(len(ids) - 1, -1, -1):
                if ids[i] in self._boundary_ids:
                    start = i + 1
                    break
            for i in range(start, len(ids)):
                if ids[i] in self._end_ids:
                    return ids[i:]
        return ids

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        self._streamed = True
        delta = self._strip_reasoning(self._delta(self._stream.feed(delta_text, delta_token_ids), False))
        if not self._ended:
            return ReasoningStep(delta=delta)
        flushed = self.finish()
        content = ((delta.content if delta else None) or "") + ((flushed.content if flushed else None) or "")
        if content:
            delta = delta or MessageDelta()
            delta.content = content
        return ReasoningStep(delta=delta, ended=True, content_token_ids=self.content_ids(delta_token_ids))

    def finish(self) -> MessageDelta | None:
        events = self._stream.finish()
        if events or self._held_content:
            return self._delta(events, True)
        return None

    def _delta(self, events: Sequence[_Event], finished: bool) -> MessageDelta | None:
        if not events and not self._held_content:
            return None
        content = self._held_content + "".join(e.value for e in events if e.kind == TEXT)
        reasoning = "".join(e.value for e in events if e.kind == THOUGHT)
        self._held_content = ""
        if any(e.kind == REASONING_END for e in events):
            self._ended = True
        if not self._content_started and content:
            if content.strip():
                self._content_started = True
            elif not finished:
                self._held_content, content = content, ""  # whitespace only: wait for more
        if content or reasoning:
            return MessageDelta(content=content or None, reasoning=reasoning or None)
        return None

    def _strip_reasoning(self, delta: MessageDelta | None) -> MessageDelta | None:
        """Trailing whitespace of streamed reasoning waits for more reasoning; at its end it is dropped."""
        if not self.grammar.strip_trailing_reasoning:
            return delta
        if delta is not None and delta.reasoning is not None:
            combined = self._held_reasoning + delta.reasoning
            trimmed = combined.rstrip()
            self._held_reasoning = combined[len(trimmed) :]
            delta.reasoning = trimmed or None
            if delta.reasoning is None and delta.content is None:
                return None
        elif self._held_reasoning and self._ended:
            self._held_reasoning = ""
        return delta

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """Streamed: the reasoning tokens the stream saw. Otherwise the output is parsed again, tool calls
        included (as vLLM counts)."""
        if self._streamed:
            return self._stream.reasoning_tokens
        if not token_ids:
            return 0
        engine = ThinkEngine(self.grammar, self.tokenizer, skip_tools=False)
        engine.feed(self.tokenizer.decode(token_ids), token_ids)
        engine.finish()
        return engine.reasoning_tokens
