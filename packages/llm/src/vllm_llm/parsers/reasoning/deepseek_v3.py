"""DeepSeek V3.x reasoning (`--reasoning-parser deepseek_v3`, vLLM's DeepSeekV3ReasoningParser).

The request's chat_template_kwargs choose the mode: with `thinking` or `enable_thinking` true the output is
DeepSeek R1's `<think>reasoning</think>content` (see `deepseek_r1`); otherwise there is no reasoning and the
whole output is content, whatever markers it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from vllm_llm.parsers._base import MessageDelta, ReasoningParser, ReasoningStep
from vllm_llm.parsers.reasoning.deepseek_r1 import DeepSeekR1ReasoningParser
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["DeepSeekV3ReasoningParser"]


class _NoReasoning(ReasoningParser):
    """Everything is content (vLLM's IdentityReasoningParser)."""

    def extract(self, text: str) -> tuple[str | None, str | None]:
        return None, text

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return True

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        delta = MessageDelta(content=delta_text) if delta_text else None
        return ReasoningStep(delta=delta, ended=True, content_token_ids=list(delta_token_ids))


def thinking_requested(chat_template_kwargs: Mapping[str, Any]) -> bool:
    """Whether `thinking` or `enable_thinking` is set (truthy) in the request's chat_template_kwargs."""
    return bool(chat_template_kwargs.get("thinking", False)) or bool(
        chat_template_kwargs.get("enable_thinking", False)
    )


class DeepSeekV3ReasoningParser(ReasoningParser):
    """R1's `<think>` reasoning when thinking is requested, else none."""

    def __init__(
        self, tokenizer: TextTokenizer, chat_template_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        self._parser: ReasoningParser
        if thinking_requested(self.chat_template_kwargs):
            self._parser = DeepSeekR1ReasoningParser(tokenizer, chat_template_kwargs)
        else:
            self._parser = _NoReasoning(tokenizer, chat_template_kwargs)

    def extract(self, text: str) -> tuple[str | None, str | None]:
        return self._parser.extract(text)

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return self._parser.is_reasoning_end(token_ids)

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        return self._parser.feed(delta_text, delta_token_ids)

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        return self._parser.count_reasoning_tokens(token_ids)
