"""GLM-4.5/4.6/4.7's tool calls (vLLM's `glm45` and `glm47`, one engine-based parser)::

    <tool_call>get_weather
    <arg_key>location</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

(GLM-4.7 writes the same without the newlines.) The name runs from `<tool_call>` to the first `<arg_key>`
(stripped); a call may have no arguments. Values are bare text typed by the tool's schema. Calls of tools
the request lacks are ignored (when it has tools). `<think>` tags are text (after a reasoning parser,
`<think>…</think>` in the content is reasoning again).
"""

from __future__ import annotations

import json
import re

from vllm_llm.parsers.tool._tagged import ARGS, CONTENT, NAME, REASONING, Ev, Grammar, TaggedToolParser

__all__ = ["GlmToolParser"]

_PAIR = r"<arg_key>(.*?)</arg_key>\s*<arg_value>"
#: A key and its closed value.
_ARGUMENT = re.compile(_PAIR + r"(.*?)</arg_value>", re.DOTALL)
#: A key and its value still open at the end of unfinished arguments.
_OPEN_ARGUMENT = re.compile(_PAIR + r"(.*)$", re.DOTALL)

_ARG_TAGS = ("key", "key_end", "value", "value_end")

_GRAMMAR = Grammar(
    tags={
        "think": "<think>",
        "think_end": "</think>",
        "call": "<tool_call>",
        "call_end": "</tool_call>",
        "key": "<arg_key>",
        "key_end": "</arg_key>",
        "value": "<arg_value>",
        "value_end": "</arg_value>",
    },
    token_tags=frozenset(("think", "think_end", "call", "call_end")),
    moves={
        (CONTENT, "call"): (NAME, (Ev.START,)),
        (NAME, "key"): (ARGS, (Ev.ARGS,)),
        (NAME, "call_end"): (CONTENT, (Ev.END,)),
        (ARGS, "call_end"): (CONTENT, (Ev.END,)),
        **{(ARGS, tag): (ARGS, (Ev.ARGS,)) for tag in _ARG_TAGS},
    },
    reasoning_moves={
        (CONTENT, "think"): (REASONING, ()),
        (CONTENT, "think_end"): (CONTENT, ()),
        (REASONING, "think"): (REASONING, ()),
        (REASONING, "think_end"): (CONTENT, (Ev.REASONING_END,)),
        (REASONING, "call"): (NAME, (Ev.REASONING_END, Ev.START)),
    },
)


def arguments_json(raw: str, partial: bool) -> str:
    """The JSON object of `<arg_key>K</arg_key><arg_value>V</arg_value>` pairs, values as strings (`partial`:
    the last value may still be open)."""
    values: dict[str, str] = {}
    for found in _ARGUMENT.finditer(raw):
        values[found.group(1).strip()] = found.group(2)
    if partial:
        still_open = _OPEN_ARGUMENT.search(_ARGUMENT.sub("", raw))
        if still_open and still_open.group(1).strip():
            values[still_open.group(1).strip()] = still_open.group(2)
    return json.dumps(values, ensure_ascii=False)


class GlmToolParser(TaggedToolParser):
    """GLM's `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>` calls."""

    supports_required_and_named = False
    structural_tag_model = "glm_4_7"
    grammar = _GRAMMAR
    checks_names = True
    trims_reasoning = True

    def convert(self, raw: str, partial: bool) -> str:
        return arguments_json(raw, partial)

    def clean_name(self, name: str) -> str:
        return name.strip()
