"""DeepSeek R1 reasoning (`--reasoning-parser deepseek_r1`, vLLM's DeepSeekR1ReasoningParser).

The output reads `<think>reasoning</think>content`; R1's chat template usually opens `<think>` in the prompt,
so the model's output starts inside the reasoning: without a start token the text is reasoning up to
`</think>`, and all reasoning when `</think>` never comes.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllm_llm.parsers._base import MessageDelta
from vllm_llm.parsers.reasoning._think import ThinkReasoningParser

__all__ = ["DeepSeekR1ReasoningParser"]


class DeepSeekR1ReasoningParser(ThinkReasoningParser):
    """`<think>…</think>`, the start token optional."""

    def without_start(self, delta_text: str, delta_ids: Sequence[int]) -> MessageDelta | None:
        return self.after_start(delta_text, delta_ids)
