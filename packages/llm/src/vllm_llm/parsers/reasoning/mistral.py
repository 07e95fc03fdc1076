"""Mistral reasoning (`--reasoning-parser mistral`, vLLM's MistralParser engine as a reasoning parser).

Magistral-style output reads `[THINK]reasoning[/THINK]content`; text before `[THINK]` is content, and a
`[TOOL_CALLS]` ends the reasoning too (the call is content, for the tool parser). Whole, every
`[THINK]…[/THINK]` span is reasoning (a stray `[/THINK]` is dropped) and trailing whitespace of the reasoning
is cut; streamed, reasoning ends at the first end marker and the rest goes to the tool phase. Without
`[THINK]` in the vocabulary there is no reasoning: everything is content.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vllm_llm.parsers._base import MessageDelta, ReasoningParser, ReasoningStep
from vllm_llm.parsers.tool._mistral_calls import CallAssembler
from vllm_llm.parsers.tool._mistral_engine import Ev, MarkupEngine
from vllm_llm.parsers.tool.mistral import END_THINK, THINK, mistral_grammar, require_tool_calls_token
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["MistralReasoningParser"]


class MistralReasoningParser(ReasoningParser):
    """`[THINK]…[/THINK]` reasoning, ended early by `[TOOL_CALLS]`."""

    engine_based = True
    keeps_special_tokens = True  # vLLM's engine parsers detokenize with special tokens kept

    def __init__(
        self, tokenizer: TextTokenizer, chat_template_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        calls_id = require_tool_calls_token(tokenizer)
        self._start_id = tokenizer.token_to_id(THINK)
        self._end_id = tokenizer.token_to_id(END_THINK)
        self._reasoning = self._start_id is not None
        # The tokens that end reasoning (none when the end marker is not a token).
        self._end_ids = (
            frozenset({self._end_id, calls_id})
            if self._reasoning and self._end_id is not None
            else frozenset()
        )
        grammar = mistral_grammar(self._reasoning)
        self._engine = MarkupEngine(grammar, tokenizer, skip_tools=True)
        self._events = CallAssembler((), reasoning_open=self._reasoning)
        self._streamed = False
        self._counter: MarkupEngine | None = None

    def extract(self, text: str) -> tuple[str | None, str | None]:
        self._streamed = False
        if not self._reasoning:
            return None, text
        self._engine.reset()
        events = self._engine.feed(text, ())
        events += self._engine.finish()
        reasoning = "".join(e.value for e in events if e.kind is Ev.REASONING).rstrip()
        content = "".join(e.value for e in events if e.kind is Ev.TEXT)
        return reasoning or None, content or None

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        if not self._reasoning:
            return True
        for tid in reversed(token_ids):
            if tid in self._end_ids:
                return True
            if tid == self._start_id:
                return False
        return False

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        self._streamed = True
        delta = self._events.trim_reasoning(
            self._events.delta(self._engine.feed(delta_text, delta_token_ids))
        )
        if not self._events.reasoning_ended:
            return ReasoningStep(delta=delta)
        # Reasoning ended: what the engine still holds is content too.
        flushed = self.finish()
        after = (delta.content if delta is not None else None) or ""
        after += (flushed.content if flushed is not None else None) or ""
        if after:
            delta = delta or MessageDelta()
            delta.content = after
        return ReasoningStep(delta=delta, ended=True, content_token_ids=self._content_ids(delta_token_ids))

    def finish(self) -> MessageDelta | None:
        events = self._engine.finish()
        if not events and not self._events.content.held:
            return None
        return self._events.delta(events, finished=True)

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """Streamed: the reasoning tokens seen so far. Else the output re-read with its token ids (vLLM's
        count: tokens attributed to the text they decode to)."""
        if self._streamed:
            return self._engine.reasoning_tokens
        if not token_ids:
            return 0
        if self._counter is None:
            self._counter = MarkupEngine(self._engine.grammar, self.tokenizer)
        counter = self._counter
        counter.reset()
        counter.feed(self.tokenizer.decode(token_ids), token_ids)
        counter.finish()
        return counter.reasoning_tokens

    def _content_ids(self, token_ids: Sequence[int]) -> list[int]:
        """The ids after reasoning in the step that ended it: after the last `[/THINK]`, else from the
        first end token (a `[TOOL_CALLS]` belongs to the content)."""
        ids = list(token_ids)
        if not self._reasoning:
            return ids
        if self._end_id is not None and self._end_id in ids:
            return ids[len(ids) - ids[::-1].index(self._end_id) :]
        for i, tid in enumerate(ids):
            if tid in self._end_ids:
                return ids[i:]
        return ids
