"""MiniMax M2 reasoning (`--reasoning-parser minimax_m2`, vLLM's MiniMax M2 parser engine as a reasoning
parser).

The model does not write `<think>` (a repeated one is dropped): the output starts inside reasoning and reads
`reasoning</think>content`. A `<minimax:tool_call>` also ends reasoning and stays in the content. Trailing
whitespace of the reasoning is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

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

__all__ = ["MiniMaxM2ReasoningParser"]

_TERMINALS = {
    "THINK_START": "<think>",
    "THINK_END": "</think>",
    "TOOL_START": "<minimax:tool_call>",
    "PARAM_START": "<parameter name=",
    "PARAM_END": "</parameter>",
    "TOOL_END": "</minimax:tool_call>",
    "INVOKE_PREFIX_DQ": '<invoke name="',
    "INVOKE_PREFIX_SQ": "<invoke name='",
    "INVOKE_PREFIX_UNQUOTED": "<invoke name=",
    "INVOKE_END": "</invoke>",
    "NAME_END_DQ": '">',
    "NAME_END_SQ": "'>",
    "NAME_END_UNQUOTED": ">",
}
_BY_TOKEN = ("THINK_START", "THINK_END", "TOOL_START", "TOOL_END")
_INVOKES = ("INVOKE_PREFIX_DQ", "INVOKE_PREFIX_SQ", "INVOKE_PREFIX_UNQUOTED")
_NAME_ENDS = ("NAME_END_DQ", "NAME_END_SQ", "NAME_END_UNQUOTED")

#: Reasoning, then content and tool calls (`<minimax:tool_call><invoke name="NAME"><parameter name="K">V
#: </parameter></invoke></minimax:tool_call>`).
_TRANSITIONS = {
    (REASONING, "THINK_START"): Step(REASONING),
    (REASONING, "THINK_END"): Step(CONTENT, (REASONING_END,)),
    (CONTENT, "THINK_END"): Step(CONTENT),
    (REASONING, "TOOL_START"): Step(TOOL_PREAMBLE, (REASONING_END,)),
    (CONTENT, "TOOL_START"): Step(TOOL_PREAMBLE),
    (TOOL_ARGS, "PARAM_START"): Step(TOOL_ARGS, (ARGS,)),
    (TOOL_ARGS, "PARAM_END"): Step(TOOL_ARGS, (ARGS,)),
    (TOOL_PREAMBLE, "TOOL_END"): Step(CONTENT),
    (TOOL_BETWEEN, "TOOL_END"): Step(CONTENT),
    (CONTENT, "TOOL_END"): Step(CONTENT),
    (TOOL_ARGS, "INVOKE_END"): Step(TOOL_BETWEEN, (CALL_END,)),
    **{
        (state, invoke): Step(TOOL_NAME, (CALL_START,))
        for state in (CONTENT, TOOL_PREAMBLE, TOOL_BETWEEN)
        for invoke in _INVOKES
    },
    **{(TOOL_NAME, end): Step(TOOL_ARGS) for end in _NAME_ENDS},
}


class MiniMaxM2ReasoningParser(EngineReasoningParser):
    """`…</think>` reasoning, always on."""

    def make_grammar(self) -> ThinkGrammar:
        return ThinkGrammar(
            terminals=_TERMINALS,
            token_terminals={name: _TERMINALS[name] for name in _BY_TOKEN},
            transitions=_TRANSITIONS,
            initial=REASONING,
            wait_for_reasoning=True,
        )

    def content_ids(self, token_ids: Sequence[int]) -> list[int]:
        """The ids after the delta's last `</think>`, else none."""
        ids = list(token_ids)
        end = self.tokenizer.token_to_id("</think>")
        if end is None or end not in ids:
            return []
        return ids[len(ids) - ids[::-1].index(end) :]
