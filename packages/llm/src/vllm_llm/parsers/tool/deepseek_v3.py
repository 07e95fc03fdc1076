"""DeepSeek V3 / R1 tool calls (`--tool-call-parser deepseek_v3`, vLLM's DeepSeekV3ToolParser).

Each call names a type and a function, its arguments in a fenced JSON block (the markers' `|` and `_` are
the full-width bar U+FF5C and U+2581):

    Let me check.<|tool_calls_begin|><|tool_call_begin|>function<|tool_sep|>get_weather
    ```json
    {"city": "Paris"}
    ```<|tool_call_end|><|tool_calls_end|>

The arguments are read from one line: a call whose JSON spans lines is not found. Content is the text
before the section; text after it is dropped. A call of another type than `function` makes the whole
output content (vLLM fails to build the call and keeps the text).
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

__all__ = ["DeepSeekV3ToolParser"]

_FENCE = "\n```json\n"
# `.` stops at line ends: type and name on one line, the arguments on the next.
_CALL = re.compile(
    f"{re.escape(CALL_BEGIN)}(.*){re.escape(SEP)}(.*){re.escape(_FENCE)}(.*)\n```{re.escape(CALL_END)}"
)
_OPEN_CALL = re.compile(f"(.*){re.escape(SEP)}(.*){re.escape(_FENCE)}(.*[^\n`])")
"""A call being streamed, once its arguments have begun (they end before a newline or backtick)."""
_OPEN_NAME = re.compile(f"(.*){re.escape(SEP)}(.*)\n")
"""A call being streamed, once its name line is complete."""


class DeepSeekV3ToolParser(DeepSeekToolParser):
    """`<|tool_call_begin|>TYPE<|tool_sep|>NAME` + a ```json block, per call."""

    supports_required_and_named: ClassVar[bool] = False  # vLLM: a structural-tag model under strict tools
    structural_tag_model: ClassVar[str | None] = "deepseek_r1"

    def whole_calls(self, text: str) -> list[ParsedCall] | None:
        calls: list[ParsedCall] = []
        for kind, name, arguments in _CALL.findall(text):
            if kind != "function":
                return None
            calls.append(ParsedCall(name=name, arguments=arguments, id=random_tool_call_id()))
        return calls

    def read_call(self, portion: str) -> ReadCall | None:
        call = _OPEN_CALL.match(portion)
        if call is not None:
            return ReadCall(name=call.group(2), arguments=call.group(3))
        named = _OPEN_NAME.match(portion)
        if named is not None:
            return ReadCall(name=named.group(2), arguments="")
        return None
