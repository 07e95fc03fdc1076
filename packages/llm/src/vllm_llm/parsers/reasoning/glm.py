"""GLM-4.5/4.6/4.7 reasoning (`--reasoning-parser glm45` or `glm47`, vLLM's GLM-4.7 MoE parser engine as a
reasoning parser).

The output reads `reasoning</think>content`, the template having opened `<think>` (a `<think>` in the output
is dropped, and one after content opens reasoning again). A `<tool_call>` also ends reasoning and stays in
the content. Trailing whitespace of the reasoning is dropped. With chat_template_kwargs `thinking` or
`enable_thinking` false there is no reasoning: the whole output is content — except for GLM-5.3's template,
which always thinks and so ignores the switch.
"""

from __future__ import annotations

from vllm_llm.parsers.reasoning._think import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    REASONING,
    REASONING_END,
    REASONING_START,
    TOOL_ARGS,
    TOOL_NAME,
    EngineReasoningParser,
    Step,
    ThinkGrammar,
)

__all__ = ["GlmReasoningParser"]

_THINK = {"THINK_START": "<think>", "THINK_END": "</think>"}
_TOOLS = {"TOOL_START": "<tool_call>", "TOOL_END": "</tool_call>"}
_ARG_TAGS = {
    "ARG_KEY_START": "<arg_key>",
    "ARG_KEY_END": "</arg_key>",
    "ARG_VALUE_START": "<arg_value>",
    "ARG_VALUE_END": "</arg_value>",
}

#: Reasoning markers (only when thinking).
_THINK_TRANSITIONS = {
    (CONTENT, "THINK_START"): Step(REASONING, (REASONING_START,)),
    (REASONING, "THINK_END"): Step(CONTENT, (REASONING_END,)),
    (CONTENT, "THINK_END"): Step(CONTENT),
}
#: Tool calls: `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`.
_TRANSITIONS = {
    (REASONING, "THINK_START"): Step(REASONING),
    (REASONING, "TOOL_START"): Step(TOOL_NAME, (REASONING_END, CALL_START)),
    (CONTENT, "TOOL_START"): Step(TOOL_NAME, (CALL_START,)),
    (TOOL_NAME, "ARG_KEY_START"): Step(TOOL_ARGS, (ARGS,)),
    (TOOL_NAME, "TOOL_END"): Step(CONTENT, (CALL_END,)),
    (TOOL_ARGS, "TOOL_END"): Step(CONTENT, (CALL_END,)),
    **{(TOOL_ARGS, tag): Step(TOOL_ARGS, (ARGS,)) for tag in _ARG_TAGS},
}
_TURN_BOUNDARIES = frozenset({"<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"})


def always_thinks(chat_template: object) -> bool:
    """GLM-5.3's template: GLM-4's format with an always-on "Reasoning Effort:" header and no switch."""
    return isinstance(chat_template, str) and (
        "[gMASK]<sop>" in chat_template
        and "Reasoning Effort:" in chat_template
        and "enable_thinking" not in chat_template
        and all(tag in chat_template for tag in ("<tool_call>", "<arg_key>", "<arg_value>"))
    )


class GlmReasoningParser(EngineReasoningParser):
    """`…</think>` reasoning, on unless `thinking`/`enable_thinking` is false."""

    @property
    def thinking(self) -> bool:
        thinking = self.chat_template_kwargs.get("thinking")
        enable_thinking = self.chat_template_kwargs.get("enable_thinking")
        if (thinking is False or enable_thinking is False) and always_thinks(self.tokenizer.chat_template):
            return True
        if thinking is None and enable_thinking is None:
            return True
        return bool(thinking) or bool(enable_thinking)

    @property
    def separates_reasoning(self) -> bool:
        return self.thinking

    def make_grammar(self) -> ThinkGrammar:
        thinking = self.thinking
        think = _THINK if thinking else {}
        return ThinkGrammar(
            terminals={**think, **_TOOLS, **_ARG_TAGS},
            token_terminals={**think, **_TOOLS},
            transitions={**(_THINK_TRANSITIONS if thinking else {}), **_TRANSITIONS},
            initial=REASONING if thinking else CONTENT,
            wait_for_reasoning=thinking,
            turn_boundaries=_TURN_BOUNDARIES,
        )
