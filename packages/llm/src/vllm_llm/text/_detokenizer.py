"""`IncrementalDetokenizer`: vLLM's `FastIncrementalDetokenizer` (tokenizers' DecodeStream) with stop strings.

Semantics copied from vllm/v1/engine/detokenizer.py: the decode stream is primed with the prompt; a
stop-terminated step (eos or a stop token id) does not detokenize its last token unless
`include_stop_str_in_output`; stop strings are checked only once more than `min_tokens` tokens exist; on a
match the tokens after the one completing the stop string are dropped and the text is cut; until finished,
`max(len(stop)) - 1` chars are held back when stop strings are excluded from the output.

That hold-back cuts text, not tokens: a delta's text may end inside a token its ids already hold. A parser
keyed on token ids (a reasoning parser's `</think>`) must read the text and ids of the same tokens, so
`next_token_steps` also releases the output step by step (one step per `update`), each step once its whole
text is released: the parser reads the steps it would read without a stop string, later. (vLLM hands its
parsers the cut text with every new id, and its id-keyed parsers split the marker.)
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from tokenizers.decoders import DecodeStream

from vllm_llm.text._stop import check_stop_strings
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["IncrementalDetokenizer", "TokenStep"]

_INVALID_PREFIX = "Invalid prefix encountered"
_log = logging.getLogger(__name__)


class TokenStep(NamedTuple):
    """The tokens of one engine output and exactly their text."""

    text: str
    token_ids: list[int]


class IncrementalDetokenizer:
    """Output text of one sequence, token by token."""

    def __init__(
        self,
        tokenizer: TextTokenizer,
        prompt_token_ids: Sequence[int],
        *,
        stop: Sequence[str] = (),
        min_tokens: int = 0,
        include_stop_str_in_output: bool = False,
        skip_special_tokens: bool = True,
        spaces_between_special_tokens: bool = True,
    ) -> None:
        self._backend = tokenizer.backend
        self.stop = list(stop)
        self.min_tokens = min_tokens
        self.include_stop_str_in_output = include_stop_str_in_output
        self.stop_buffer_length = (
            max(len(s) for s in self.stop) - 1 if self.stop and not include_stop_str_in_output else 0
        )
        self.token_ids: list[int] = []
        self.output_text = ""
        self._sent = 0
        # (tokens, chars) at the end of each update not yet released as a step; kept only while text is
        # held back (else the steps are the deltas themselves).
        self._steps: deque[tuple[int, int]] | None = deque() if self.stop_buffer_length else None
        self._step_sent = (0, 0)
        self._skip_special_tokens = skip_special_tokens
        self._stream = DecodeStream(ids=list(prompt_token_ids), skip_special_tokens=skip_special_tokens)
        # As vLLM: skipping special tokens implies spaces between them (nothing to space).
        self._added: dict[int, str] | None = None
        if not (skip_special_tokens or spaces_between_special_tokens) and tokenizer.added_tokens:
            self._added = tokenizer.added_tokens
        self._last_special = False

    def num_output_tokens(self) -> int:
        """Tokens kept so far (after any stop-string trim)."""
        return len(self.token_ids)

    def update(self, new_token_ids: Sequence[int], stop_terminated: bool) -> str | None:
        """Detokenize new tokens and check stop strings; return the matched stop string, if any."""
        if not new_token_ids:
            return None
        new = list(new_token_ids)
        skipped: int | None = None
        if stop_terminated and not self.include_stop_str_in_output:
            skipped = new.pop()
        num_prev = len(self.token_ids)
        offsets = [len(self.output_text)] if self.stop else None
        for token in new:
            self.token_ids.append(token)
            self.output_text += self._decode_next(token)
            if offsets is not None:
                offsets.append(len(self.output_text))
        if skipped is not None:
            self.token_ids.append(skipped)
            if offsets is not None:
                offsets.append(len(self.output_text))
        if self._steps is not None:
            self._steps.append((len(self.token_ids), len(self.output_text)))
        if offsets is None or len(self.token_ids) <= self.min_tokens:
            return None
        check_from = offsets[max(self.min_tokens - num_prev, 0)]
        match = check_stop_strings(
            self.output_text, len(self.output_text) - check_from, self.stop, self.include_stop_str_in_output
        )
        if match is None:
            return None
        stop_end = len(self.output_text) if match.truncate_to == -1 else match.truncate_to
        if not self.include_stop_str_in_output:
            stop_end += len(match.stop)
        # Drop tokens after the one completing the stop string (several may arrive in one output).
        del self.token_ids[num_prev + bisect_left(offsets, stop_end, lo=1) :]
        if match.truncate_to != -1:
            self.output_text = self.output_text[: match.truncate_to]
        return match.stop

    def next_text(self, finished: bool) -> str:
        """The text not yet returned, holding back a possible stop-string prefix until finished."""
        length = len(self.output_text) - (0 if finished else self.stop_buffer_length)
        if self._sent < length:
            text = self.output_text[self._sent : length]
            self._sent = length
            return text
        return ""

    def next_token_steps(self, finished: bool) -> list[TokenStep] | None:
        """The steps not yet returned whose text is released whole (all of them once finished, cut where
        a stop string cut the output); None when no text is held back (the deltas are the steps)."""
        steps = self._steps
        if steps is None:
            return None
        released = []
        limit = len(self.output_text) - self.stop_buffer_length
        while steps and (finished or steps[0][1] <= limit):
            tokens, chars = steps.popleft()
            tokens, chars = min(tokens, len(self.token_ids)), min(chars, len(self.output_text))
            sent_tokens, sent_chars = self._step_sent
            released.append(TokenStep(self.output_text[sent_chars:chars], self.token_ids[sent_tokens:tokens]))
            self._step_sent = (tokens, chars)
        return released

    def _decode_next(self, token: int) -> str:
        text = self._step(token)
        if self._added is not None:
            special = self._added.get(token)
            if special is not None and self._last_special:
                text = special
            self._last_special = special is not None
        return text or ""

    def _step(self, token: int) -> str | None:
        try:
            result: str | None = self._stream.step(self._backend, token)
        except (OverflowError, TypeError):
            _log.exception("invalid token id %r", token)
            return None
        except Exception as exc:
            if not str(exc).startswith(_INVALID_PREFIX):
                raise
            # Non-monotonic UTF-8 output broke the stream's state: restart it, as vLLM does.
            self._stream = DecodeStream(skip_special_tokens=self._skip_special_tokens)
            result = self._stream.step(self._backend, token)
        return result
