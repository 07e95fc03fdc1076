"""The first two stages of the marker engine (vLLM's TokenIDScanner and IncrementalLexer): a delta's text
cut into terminals and text, each piece carrying the number of tokens it is counted as (vLLM counts
reasoning tokens by these; its attribution is mirrored here, losses included).

`Scanner` splits a delta at the tokens that are terminals, placing their text in the delta text: text the
detokenizer held back comes first, and a terminal whose text has not arrived yet waits for it. `Lexer` cuts
literal terminals out of text, holding back a tail that may still grow into one (`[TOO`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["DROP", "Lexer", "Piece", "Scanner"]

DROP = "<drop>"
"""The terminal of a special token the grammar does not use: dropped from the output."""


class Piece(NamedTuple):
    """A terminal (`name`) or, with name None, text; `tokens` is how many tokens it counts as."""

    name: str | None
    text: str
    token_texts: tuple[str, ...] = ()
    tokens: int = 0


def _char_counts(text: str, token_texts: Sequence[str], tokens: int) -> list[int]:
    """Tokens per character: each token at the first place its text is found (in order); the tokens not
    found on the first character."""
    counts = [0] * len(text)
    if not text:
        return counts
    if not token_texts:
        counts[0] = tokens
        return counts
    at = placed = 0
    for token_text in token_texts:
        found = text.find(token_text, at) if token_text else -1
        if found >= 0:
            counts[found] += 1
            placed += 1
            at = found + len(token_text)
    counts[0] += max(tokens - placed, 0)
    return counts


class Lexer:
    """Literal terminals cut out of streamed text."""

    def __init__(self, literals: Mapping[str, str]) -> None:
        self._names = dict(literals)  # literal → terminal name
        self._firsts = frozenset(lit[0] for lit in literals if lit)
        self._prefixes = frozenset(lit[:i] for lit in literals for i in range(1, len(lit)))
        self._by_first: dict[str, list[str]] = {}
        for lit in literals:
            if lit:
                self._by_first.setdefault(lit[0], []).append(lit)
        self.buffer = ""
        self._counts: list[int] = []

    def reset(self) -> None:
        self.buffer = ""
        self._counts = []

    def feed(self, text: str, token_texts: tuple[str, ...] = (), tokens: int = 0) -> list[Piece]:
        counts = _char_counts(text, token_texts, tokens)
        if not self.buffer and self._firsts.isdisjoint(text):
            return [Piece(None, text, tokens=sum(counts))]
        self.buffer += text
        self._counts += counts
        return self._drain(final=False)

    def flush(self) -> list[Piece]:
        out = self._drain(final=True) if self.buffer else []
        if self.buffer:
            out.append(Piece(None, self.buffer, tokens=sum(self._counts)))
            self.reset()
        return out

    def _take(self, n: int) -> int:
        taken = sum(self._counts[:n])
        del self._counts[:n]
        self.buffer = self.buffer[n:]
        return taken

    def _drain(self, *, final: bool) -> list[Piece]:
        out: list[Piece] = []
        while self.buffer:
            buf = self.buffer
            if self._firsts.isdisjoint(buf):
                out.append(Piece(None, buf, tokens=self._take(len(buf))))
                break
            if buf in self._prefixes and not final:
                break  # may still become a (longer) literal
            match = max(
                (lit for lit in self._by_first.get(buf[0], ()) if buf.startswith(lit)), key=len, default=""
            )
            if match:
                out.append(Piece(self._names[match], match, tokens=self._take(len(match))))
                continue
            end = self._boundary(buf)
            out.append(Piece(None, buf[:end], tokens=self._take(end)))
        return out

    def _boundary(self, buf: str) -> int:
        """Where text stops: the first later position that could start a literal."""
        for i in range(1, len(buf)):
            if buf[i] not in self._firsts:
                continue
            tail = buf[i:]
            for lit in self._names:
                n = min(len(tail), len(lit))
                if tail[:n] == lit[:n]:
                    return i
        return len(buf)


class Scanner:
    """A delta's terminal tokens (by id) placed in its text."""

    def __init__(self, by_id: Mapping[int, str], tokenizer: TextTokenizer) -> None:
        self._by_id = by_id
        self._tokenizer = tokenizer
        self._texts: dict[int, str] = {}
        self.reset()

    def reset(self) -> None:
        self._pending: list[Piece] = []  # terminals waiting for their text
        self._pending_counts: list[int] = []  # tokens of the text before each
        self._pending_tail = 0  # tokens after the last
        self._pending_text = ""

    def _decode(self, token_id: int) -> str:
        text = self._texts.get(token_id)
        if text is None:
            text = self._texts[token_id] = self._tokenizer.decode([token_id])
        return text

    def scan(self, text: str, token_ids: Sequence[int]) -> list[Piece]:
        out: list[Piece] = []
        tail = 0
        if self._pending:
            out, text, tail = self._resolve(text, len(token_ids))
        if not any(tid in self._by_id for tid in token_ids):
            if text:
                token_texts = tuple(self._decode(tid) for tid in token_ids)
                out.append(Piece(None, text, token_texts, (tail if out else 0) + len(token_texts)))
            return out
        pieces: list[Piece] = [Piece(None, "", (), tail)] if tail else []
        run: list[str] = []
        for tid in token_ids:
            name = self._by_id.get(tid)
            if name is None:
                run.append(self._decode(tid))
                continue
            if "".join(run):
                pieces.append(Piece(None, "".join(run), tuple(run), len(run)))
            run = []
            pieces.append(Piece(name, self._decode(tid)))
        if "".join(run):
            pieces.append(Piece(None, "".join(run), tuple(run), len(run)))
        if text:
            return out + self._place(text, pieces)
        # Nothing to match the token texts against yet: the terminals wait for their text.
        before = 0
        for piece in pieces:
            if piece.name is None:
                before += piece.tokens
            else:
                self._pending.append(piece)
                self._pending_counts.append(before)
                before = 0
        self._pending_tail += before
        return out

    def flush(self) -> list[Piece]:
        """At the end: terminals still waiting, with the text they waited in."""
        if not self._pending and not self._pending_text:
            return []
        out: list[Piece] = []
        if self._pending_text:
            out.append(
                Piece(None, self._pending_text, (), self._pending_counts[0] if self._pending_counts else 0)
            )
        out += self._pending
        if self._pending_tail:
            out.append(Piece(None, "", (), self._pending_tail))
        self.reset()
        return out

    def _resolve(self, text: str, tokens: int) -> tuple[list[Piece], str, int]:
        """Waiting terminals placed in `text`: them (with the text before), the text after, and the tokens
        of the text after the last one when none waits any more."""
        pending, counts, tail = self._pending, self._pending_counts, self._pending_tail
        rest = self._pending_text + text
        self.reset()
        out: list[Piece] = []
        for terminal, before in zip(pending, counts, strict=True):
            at = rest.find(terminal.text)
            if at < 0:
                if rest:
                    self._pending_text += rest
                    before += tokens
                    rest = ""
                self._pending.append(terminal)
                self._pending_counts.append(before)
                continue
            if at:
                out.append(Piece(None, rest[:at], (), before))
            out.append(terminal)
            rest = rest[at + len(terminal.text) :]
        if self._pending:
            self._pending_tail, tail = tail, 0
        return out, rest, tail

    def _place(self, text: str, pieces: list[Piece]) -> list[Piece]:
        """`pieces` (decoded token by token) matched to the delta text."""
        joined = "".join(p.text for p in pieces)
        if not joined:
            return [Piece(None, text), *pieces]
        at = text.find(joined)
        if at > 0:
            return [Piece(None, text[:at]), *pieces]
        if at == 0:
            return pieces
        # Decoded one by one the tokens read differently: anchor the terminals in the text, right to left.
        anchors = [p for p in pieces if p.name is not None]
        groups: list[list[str]] = [[] for _ in range(len(anchors) + 1)]
        group_tokens = [0] * (len(anchors) + 1)
        g = 0
        for piece in pieces:
            if piece.name is not None:
                g += 1
            else:
                groups[g] += piece.token_texts
                group_tokens[g] += piece.tokens
        spots = [-1] * len(anchors)
        end = len(text)
        for i in range(len(anchors) - 1, -1, -1):
            spot = text.rfind(anchors[i].text, 0, end)
            if spot >= 0:
                spots[i] = end = spot
        out: list[Piece] = []
        used = 0
        for i, anchor in enumerate(anchors):
            if spots[i] >= used:
                if spots[i] > used:
                    out.append(Piece(None, text[used : spots[i]], tuple(groups[i]), group_tokens[i]))
                out.append(anchor)
                used = spots[i] + len(anchor.text)
                continue
            if used < len(text) and anchor.name != DROP and all(s < 0 for s in spots[i + 1 :]):
                self._pending_text += text[used:]
                used = len(text)
            self._pending.append(anchor)
            self._pending_counts.append(group_tokens[i])
        if used < len(text):
            out.append(Piece(None, text[used:], tuple(groups[-1]), group_tokens[-1]))
        return out
