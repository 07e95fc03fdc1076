"""DeepSeek V3.1 tool calls (`--tool-call-parser deepseek_v31`, vLLM's DeepSeekV31ToolParser).

Each call is a name and its JSON arguments between markers (the markers' `|` and `_` are the full-width
bar U+FF5C and U+2581):

    Let me check.<|tool_calls_begin|><|tool_call_begin|>get_weather<|tool_sep|>{"city": "Paris"}
    <|tool_call_end|><|tool_calls_end|>

(one line, broken here).

Name and arguments are read from one line each: a call whose arguments span lines is not found (and
streams only its first line). Content is the text before the section; text after it is dropped.
"""

from __future__ import annotations

import re
from typing import ClassVar

from vllm_llm.parsers._base import ParsedCall, random_tool_call_id
from vllm_llm.parsers.tool._deepseek_common import (
    CALL_BEGIN,
    CALL_END,
    SEP,
    DeepSeekToolParser,
    ReadCall,
)

__all__ = ["DeepSeekV31ToolParser"]

_CALL = re.compile(f"{re.escape(CALL_BEGIN)}(.*?){re.escape(SEP)}(.*?){re.escape(CALL_END)}")
_OPEN_CALL = re.compile(f"(.*){re.escape(SEP)}(.*)")
"""A call being streamed, once its name is complete (`.` stops at line ends)."""


class DeepSeekV31ToolParser(DeepSeekToolParser):
    """`<|tool_call_begin|>NAME<|tool_sep|>ARGUMENTS<|tool_call_end|>`, per call."""

    supports_required_and_named: ClassVar[bool] = False  # vLLM: a structural-tag model under strict tools
    structural_tag_model: ClassVar[str | None] = "deepseek_v3_1"

    def whole_calls(self, text: str) -> list[ParsedCall] | None:
        return [
            ParsedCall(name=name, arguments=arguments, id=random_tool_call_id())
            for name, arguments in _CALL.findall(text)
        ]

    def read_call(self, portion: str) -> ReadCall | None:
        # vLLM's name-only fallback pattern can only match where this one does: it is never reached.
        call = _OPEN_CALL.match(portion)
        return None if call is None else ReadCall(name=call.group(1), arguments=call.group(2))
