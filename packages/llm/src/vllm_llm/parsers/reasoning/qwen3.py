"""Qwen3 reasoning (`--reasoning-parser qwen3`, vLLM's Qwen3 parser engine as a reasoning parser).

The output reads `reasoning</think>content`: Qwen3's chat template opens `<think>` in the prompt, so output
starts inside reasoning (a `<think>` the model repeats is dropped). A `<tool_call>` also ends reasoning and
stays in the content. With chat_template_kwargs `enable_thinking: false` there is no reasoning: the whole
output is content.
"""

from __future__ import annotations

from vllm_llm.parsers.reasoning._think import (
    ARGS,
    CALL_END,
    CALL_START,
    CONTENT,
    REASONING,
    REASONING_END,
    TOOL_ARGS,
    TOOL_BETWEEN,
    TOOL_NAME,
    TOOL_PREAMBLE,
    EngineReasoningParser,
    Step,
    ThinkGrammar,
)

__all__ = ["Qwen3ReasoningParser"]

_TERMINALS = {
    "THINK_START": "<think>",
    "THINK_END": "</think>",
    "TOOL_START": "<tool_call>",
    "TOOL_END": "</tool_call>",
    "FUNC_PREFIX": "<function=",
    "FUNC_END": "</function>",
    "PARAM_START": "<parameter=",
    "PARAM_END": "</parameter>",
    "CLOSE_ANGLE": ">",
}
_BY_TOKEN = ("THINK_START", "THINK_END", "TOOL_START", "TOOL_END")

#: Reasoning, then content and Qwen3-Coder's XML tool calls (`<tool_call><function=NAME><parameter=K>V
#: </parameter></function></tool_call>`).
_TRANSITIONS = {
    (REASONING, "THINK_START"): Step(REASONING),
    (REASONING, "THINK_END"): Step(CONTENT, (REASONING_END,)),
    (CONTENT, "THINK_END"): Step(CONTENT),
    (REASONING, "TOOL_START"): Step(TOOL_PREAMBLE, (REASONING_END, CALL_START)),
    (CONTENT, "TOOL_START"): Step(TOOL_PREAMBLE, (REASONING_END, CALL_START)),
    (CONTENT, "FUNC_PREFIX"): Step(TOOL_NAME, (CALL_START,)),
    (TOOL_PREAMBLE, "TOOL_END"): Step(CONTENT, (CALL_END,)),
    (TOOL_PREAMBLE, "FUNC_PREFIX"): Step(TOOL_NAME),
    (TOOL_NAME, "CLOSE_ANGLE"): Step(TOOL_ARGS),
    (TOOL_NAME, "FUNC_END"): Step(TOOL_BETWEEN, (CALL_END,)),
    (TOOL_ARGS, "FUNC_END"): Step(TOOL_BETWEEN, (CALL_END,)),
    (TOOL_ARGS, "PARAM_START"): Step(TOOL_ARGS, (ARGS,)),
    (TOOL_ARGS, "PARAM_END"): Step(TOOL_ARGS, (ARGS,)),
    (TOOL_BETWEEN, "TOOL_END"): Step(CONTENT),
    (TOOL_BETWEEN, "TOOL_START"): Step(TOOL_PREAMBLE, (CALL_START,)),
    (TOOL_BETWEEN, "FUNC_PREFIX"): Step(TOOL_NAME, (CALL_START,)),
}


class Qwen3ReasoningParser(EngineReasoningParser):
    """`…</think>` reasoning, on unless `enable_thinking` is false."""

    @property
    def thinking(self) -> bool:
        return bool(self.chat_template_kwargs.get("enable_thinking", True))

    @property
    def separates_reasoning(self) -> bool:
        return self.thinking

    def make_grammar(self) -> ThinkGrammar:
        thinking = self.thinking
        return ThinkGrammar(
            terminals=_TERMINALS,
            token_terminals={name: _TERMINALS[name] for name in _BY_TOKEN},
            transitions=_TRANSITIONS,
            initial=REASONING if thinking else CONTENT,
            wait_for_reasoning=thinking,
            turn_boundaries=frozenset({"<|im_start|>", "<|im_end|>"}),
            strip_trailing_reasoning=False,
        )
