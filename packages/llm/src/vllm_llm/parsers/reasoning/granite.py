"""Granite reasoning (`--reasoning-parser granite`, vLLM's GraniteReasoningParser).

Granite 3.2 marks its sections with plain text, no special tokens:

    Here is my thought process: ...reasoning... Here is my response: ...content...

("Here's" also matches). Whole, the first such pair anywhere in the output splits it (text before the
thought marker is lost); without both markers everything is content. Streamed, the output must open with the
thought marker (held back while it may still be one); the response marker is held back while it may be one.
The reasoning never "ends" in vLLM's sense for this parser (it has no end token), so a stream stays in the
reasoning phase: tool calls after the response marker stream as content.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from vllm_llm.parsers._base import MessageDelta, ReasoningParser, ReasoningStep
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["GraniteReasoningParser"]

_THINK_STARTS = ("Here's my thought process:", "Here is my thought process:")
_RESPONSE_STARTS = ("Here's my response:", "Here is my response:")
_WHOLE = re.compile(
    r"(?:Here's|Here is) my thought process:(.*?)(?:Here's|Here is) my response:(.*)", re.DOTALL
)


def _starts_think(text: str) -> bool:
    return any(start.startswith(text) for start in _THINK_STARTS)


def _starts_response(text: str) -> bool:
    return any(start.startswith(text) for start in _RESPONSE_STARTS)


def _sections(text: str) -> tuple[str | None, int | None, str | None]:
    """(reasoning, length of the response marker, content) of the text so far: the thought marker must open
    the text; each `:` closes a candidate marker."""
    chunk_start = 0
    reasoning_start: int | None = None
    for colon in (i for i, ch in enumerate(text) if ch == ":"):
        chunk = text[chunk_start:colon]
        if reasoning_start is None:
            if any(chunk == start[:-1] for start in _THINK_STARTS):
                reasoning_start = chunk_start = colon + 1
            continue
        for start in _RESPONSE_STARTS:
            if chunk[-len(start) + 1 :] == start[:-1]:
                return text[reasoning_start : colon - len(start)], len(start), text[colon + 1 :]
    if reasoning_start:
        return text[reasoning_start:], None, None
    return None, None, None


class GraniteReasoningParser(ReasoningParser):
    """`Here is my thought process: … Here is my response: …`."""

    def __init__(
        self, tokenizer: TextTokenizer, chat_template_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        self._text = ""

    def extract(self, text: str) -> tuple[str | None, str | None]:
        found = _WHOLE.search(text)
        if found is None:
            return None, text
        reasoning, content = found.group(1), found.group(2)
        return reasoning, content or None

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return False  # vLLM's parser does not implement it: never

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        previous = self._text
        text = self._text = previous + delta_text
        reasoning, marker_len, content = _sections(text)
        if not reasoning:
            delta = self._before_reasoning(previous, text, delta_text)
        elif not content:
            delta = self._in_reasoning(text, reasoning, delta_text)
        else:
            assert marker_len is not None
            delta = self._in_response(text, reasoning, marker_len, content, delta_text)
        if not delta.content and not delta.reasoning:
            return ReasoningStep(delta=None)
        return ReasoningStep(delta=delta)

    @staticmethod
    def _before_reasoning(previous: str, text: str, delta_text: str) -> MessageDelta:
        """No complete thought marker yet: hold back while the text may still be one."""
        if _starts_think(text):
            return MessageDelta()
        if _starts_think(previous):
            return MessageDelta(content=text)  # it was not the marker after all: send what was held
        return MessageDelta(content=delta_text)

    @staticmethod
    def _in_reasoning(text: str, reasoning: str, delta_text: str) -> MessageDelta:
        """Reasoning, no response marker yet: hold back a tail that may become the marker."""
        if any(text.endswith(start) for start in _RESPONSE_STARTS):
            return MessageDelta()
        before = reasoning[: -len(delta_text)]  # (all of it lost when the delta is empty, as in vLLM)
        prev_at = before.rfind("Here")
        delta_at = delta_text.rfind("Here")
        was_marker = prev_at >= 0 and _starts_response(before[prev_at:])
        continues_marker = prev_at >= 0 and _starts_response(reasoning[prev_at:])
        new_marker = delta_at >= 0 and _starts_response(delta_text[delta_at:])
        if continues_marker:
            return MessageDelta()
        if not was_marker:
            return MessageDelta(reasoning=delta_text[:delta_at] if new_marker else delta_text)
        if new_marker:
            return MessageDelta(reasoning=before[prev_at:] + delta_text[:delta_at])
        return MessageDelta(reasoning=before[prev_at:] + delta_text)

    @staticmethod
    def _in_response(
        text: str, reasoning: str, marker_len: int, content: str, delta_text: str
    ) -> MessageDelta:
        """Both markers seen: the delta's tail is content, anything before the marker in it reasoning."""
        delta_content = delta_text[-len(content) :]
        reasoning_end = len(delta_text) - (len(content) + marker_len)
        if reasoning_end < 0:
            return MessageDelta(content=delta_content)
        start = len(reasoning) + marker_len + len(content) - 1 - (len(text) - len(delta_text))
        return MessageDelta(reasoning=delta_text[max(start, 0) : reasoning_end], content=delta_content)
