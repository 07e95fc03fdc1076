"""Forced tool choices (`required`, named) read from the JSON the constraint produced: whole and streamed,
as vLLM's generic handling (vLLM's `_extract_tool_calls` and `vllm/tool_parsers/streaming.py`).

(Placeholder API, filled in by the forced-choice work: NamedCallStream, RequiredCallStream, parse_required.)
"""

from __future__ import annotations

from vllm_llm.parsers._base import MessageDelta, ParsedCall

__all__ = ["NamedCallStream", "RequiredCallStream", "parse_required"]


def parse_required(content: str) -> list[ParsedCall]:
    """The calls of a `required` output: a JSON list of {"name", "parameters"}; [] when it is not one."""
    raise NotImplementedError


class NamedCallStream:
    """Streams the arguments of the one named call."""

    def __init__(self, name: str, *, index: int) -> None:
        self.name = name
        self.index = index

    def feed(self, delta_text: str) -> MessageDelta | None:
        raise NotImplementedError


class RequiredCallStream:
    """Streams the calls of a `required` output as its JSON list grows."""

    def __init__(self, *, index: int) -> None:
        self.index = index

    def feed(self, delta_text: str) -> MessageDelta | None:
        raise NotImplementedError
