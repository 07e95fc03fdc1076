"""Llama 4 pythonic tool calls (`--tool-call-parser llama4_pythonic`, vLLM's Llama4PythonicToolParser): the
answer is a Python list of keyword-argument calls, as for `pythonic`, which Llama 4 sometimes wraps in its
python markers:

    <|python_start|>[get_weather(city='Paris')]<|python_end|>

A whole output starting with `<|python_start|>` is read without it and without any `<|python_end|>` (and is
that as content when it is no call list); streamed, the start marker is dropped and an end marker closing
the text so far is ignored.
"""

from __future__ import annotations

from typing import ClassVar

from vllm_llm.parsers.tool._pythonic_common import PythonicCallsParser

__all__ = ["Llama4PythonicToolParser"]

PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"


class Llama4PythonicToolParser(PythonicCallsParser):
    """A Python call list as the whole answer, optionally in `<|python_start|>`…`<|python_end|>`."""

    start_marker: ClassVar[str | None] = PYTHON_START

    def unwrap(self, text: str) -> str:
        if text.startswith(PYTHON_START):
            return text[len(PYTHON_START) :].replace(PYTHON_END, "")
        return text

    def unwrap_partial(self, text: str) -> str:
        return text.removeprefix(PYTHON_START).removesuffix(PYTHON_END)
