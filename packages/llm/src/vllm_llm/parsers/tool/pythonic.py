"""Pythonic tool calls (`--tool-call-parser pythonic`, vLLM's PythonicToolParser), as Llama 3.2 and
ToolACE write them: the whole answer is a Python list of keyword-argument calls,

    [get_weather(city='San Francisco', metric='celsius'), get_time(zone="America/Los_Angeles")]

and any other answer is plain content. See `_pythonic_common` for how the list is read.
"""

from __future__ import annotations

from vllm_llm.parsers.tool._pythonic_common import PythonicCallsParser

__all__ = ["PythonicToolParser"]


class PythonicToolParser(PythonicCallsParser):
    """A Python call list as the whole answer."""
