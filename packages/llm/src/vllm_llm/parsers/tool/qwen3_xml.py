"""Qwen3-Coder's XML tool calls (vLLM's `qwen3_coder` and `qwen3_xml`, one engine-based parser)::

    <tool_call>
    <function=get_weather>
    <parameter=location>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

Parameter values are bare text (one wrapping newline each side is markup), typed by the tool's schema
(`3` is a number for an integer parameter, a string for a string one). A `<function=…>` without the
`<tool_call>` wrapper is a call too, and calls may follow each other without closing the wrapper. A
`<parameter=…>` closes the one before it. Calls of tools the request lacks are kept. `<think>` tags are
text (after a reasoning parser, a repeated `</think>` disappears).
"""

from __future__ import annotations

import json
import re

from vllm_llm.parsers.tool._tagged import (
    ARGS,
    BETWEEN,
    CONTENT,
    NAME,
    PREAMBLE,
    Ev,
    Grammar,
    TaggedToolParser,
)

__all__ = ["Qwen3XmlToolParser"]

_OPEN = r"<\s*parameter\s*=\s*"
_CLOSE = r"<\s*/\s*parameter\s*>"
#: A parameter closed by its tag or by the next parameter.
_PARAMETER = re.compile(_OPEN + r"([^>]*)>(.*?)(?:" + _CLOSE + r"|(?=" + _OPEN + r"))", re.DOTALL)
#: A parameter still open at the end of unfinished arguments.
_OPEN_PARAMETER = re.compile(_OPEN + r"([^>]+)>(.*)$", re.DOTALL)

_GRAMMAR = Grammar(
    tags={
        "think": "<think>",
        "think_end": "</think>",
        "call": "<tool_call>",
        "call_end": "</tool_call>",
        "function": "<function=",
        "function_end": "</function>",
        "parameter": "<parameter=",
        "parameter_end": "</parameter>",
        "close": ">",
    },
    token_tags=frozenset(("think", "think_end", "call", "call_end")),
    moves={
        (CONTENT, "call"): (PREAMBLE, (Ev.START,)),
        (CONTENT, "function"): (NAME, (Ev.START,)),  # no <tool_call> wrapper
        (PREAMBLE, "function"): (NAME, ()),
        (PREAMBLE, "call_end"): (CONTENT, (Ev.END,)),
        (NAME, "close"): (ARGS, ()),
        (NAME, "function_end"): (BETWEEN, (Ev.END,)),
        (ARGS, "parameter"): (ARGS, (Ev.ARGS,)),
        (ARGS, "parameter_end"): (ARGS, (Ev.ARGS,)),
        (ARGS, "function_end"): (BETWEEN, (Ev.END,)),
        (BETWEEN, "call_end"): (CONTENT, ()),
        (BETWEEN, "call"): (PREAMBLE, (Ev.START,)),  # the wrapper left open
        (BETWEEN, "function"): (NAME, (Ev.START,)),
    },
    reasoning_moves={(CONTENT, "think_end"): (CONTENT, ())},  # a repeated end of reasoning disappears
)


def _unwrap(value: str) -> str:
    """A value without the newline the template puts on each side of it."""
    value = value.removeprefix("\n")
    return value.removesuffix("\n")


def parameters_json(raw: str, partial: bool) -> str:
    """The JSON object of `<parameter=KEY>VALUE</parameter>` markup, values as strings (`partial`: the last
    parameter may still be open)."""
    values: dict[str, str] = {}
    for found in _PARAMETER.finditer(raw):
        values[found.group(1)] = _unwrap(found.group(2))
    if partial:
        still_open = _OPEN_PARAMETER.search(_PARAMETER.sub("", raw))
        if still_open:
            values[still_open.group(1)] = _unwrap(still_open.group(2))
    return json.dumps(values, ensure_ascii=False)


class Qwen3XmlToolParser(TaggedToolParser):
    """Qwen3-Coder's `<function=NAME><parameter=KEY>VALUE</parameter></function>` calls."""

    supports_required_and_named = False
    structural_tag_model = "qwen_3_coder"
    grammar = _GRAMMAR

    def convert(self, raw: str, partial: bool) -> str:
        return parameters_json(raw, partial)
