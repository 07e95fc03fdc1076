"""Logprobs with decoded tokens: `TokenLogprobs` per position, built as vLLM's `LogprobsProcessor` does.

Each position holds vLLM's per-position logprob dict in order (`candidates`): the sampled (or prompt) token
first with its rank, then the top-k with ranks 1..k, a token listed twice keeping its first place and its
last value. Decoded token strings are each id decoded alone; one ending in an unfinished UTF-8 sequence is
corrected with up to 4 preceding sampled tokens as context.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from vllm_llm.text._tokenizer import TextTokenizer
from vllm_llm.wire import LogprobRow

__all__ = ["LogprobCandidate", "LogprobsProcessor", "TokenLogprobs"]

_MAX_CONTEXT = 4


class LogprobCandidate(msgspec.Struct, kw_only=True, frozen=True):
    """One token's logprob at a position."""

    token_id: int
    token: str
    """The token decoded on its own."""
    logprob: float
    rank: int
    """Vocabulary rank (1 = most likely)."""


class TokenLogprobs(msgspec.Struct, kw_only=True, frozen=True):
    """The logprobs at one position: the chosen token and the candidates (vLLM's dict, in order)."""

    token_id: int
    token: str
    logprob: float
    rank: int
    candidates: list[LogprobCandidate]
    """The chosen token first, then the top-k (deduplicated); an OpenAI server takes `candidates[:k]`."""


class LogprobsProcessor:
    """Turns wire logprob rows into `TokenLogprobs`, keeping the context UTF-8 correction needs."""

    def __init__(self, tokenizer: TextTokenizer, num_logprobs: int | None) -> None:
        self._tokenizer = tokenizer
        self._num_logprobs = num_logprobs
        self._context: list[int] = []
        self._prompt_context: list[int] = []
        self.cumulative_logprob: float | None = None if num_logprobs is None else 0.0

    def sample(self, rows: Sequence[LogprobRow]) -> list[TokenLogprobs]:
        """Positions of newly sampled tokens; updates the cumulative logprob."""
        out = []
        for row in rows:
            out.append(self._position(row, self._num_logprobs, self._context))
            if self.cumulative_logprob is not None:
                self.cumulative_logprob += row.logprobs[0]
        return out

    def prompt(self, rows: Sequence[LogprobRow], num_logprobs: int | None) -> list[TokenLogprobs | None]:
        """Prompt positions: None for the first prompt token, then one per row."""
        return [None, *(self._position(row, num_logprobs, self._prompt_context) for row in rows)]

    def _position(self, row: LogprobRow, num_logprobs: int | None, context: list[int]) -> TokenLogprobs:
        tokens = self._tokenizer.decode_each(row.token_ids)
        for i, text in enumerate(tokens):
            if self._tokenizer.ends_incomplete(text):
                tokens[i] = self._correct(row.token_ids[i], context)
        k = len(row.logprobs) if num_logprobs is None or num_logprobs == -1 else num_logprobs
        ranks = [row.rank, *range(1, k + 1)]
        by_id: dict[int, LogprobCandidate] = {}
        for token_id, logprob, rank, token in zip(row.token_ids, row.logprobs, ranks, tokens, strict=False):
            by_id[token_id] = LogprobCandidate(token_id=token_id, token=token, logprob=logprob, rank=rank)
        first = by_id[row.token_ids[0]]
        context.append(row.token_ids[0])
        del context[:-_MAX_CONTEXT]
        return TokenLogprobs(
            token_id=first.token_id,
            token=first.token,
            logprob=first.logprob,
            rank=first.rank,
            candidates=list(by_id.values()),
        )

    def _correct(self, token_id: int, context: Sequence[int]) -> str:
        # vLLM's LogprobsProcessor._correct_decoded_token.
        tok = self._tokenizer
        for num_ctx in range(1, min(len(context), _MAX_CONTEXT) + 1):
            ctx = list(context[-num_ctx:])
            full = tok.decode([*ctx, token_id])
            if tok.ends_incomplete(full):
                continue
            clean_end = len(ctx)
            for j in range(len(ctx) - 1, -1, -1):
                if not tok.ends_incomplete(tok.decode([ctx[j]])):
                    break
                clean_end = j
            prefix = tok.decode(ctx[:clean_end]) if clean_end > 0 else ""
            if full.startswith(prefix):
                return full[len(prefix) :]
            common = 0
            for a, b in zip(prefix, full, strict=False):
                if a != b:
                    break
                common += 1
            return full[common:]
        return ""
