"""What every parser speaks: the parsed shapes and the two parser interfaces.

A tool parser turns model text into content and function calls; a reasoning parser splits model text into
reasoning and content. Each has one job, for one format, in two modes: whole (`extract`) and streamed
(`feed` once per engine delta, then `finish`). A parser object serves one choice of one request; streamed
state lives on it. `vllm_llm.parsers.ChatParser` composes the two as vLLM's serving layer does (reasoning
first, tools in the content after it, `tool_choice` applied).

The formats, names and edge cases are vLLM 0.32's (`vllm/tool_parsers`, `vllm/reasoning`, `vllm/parser`);
tests run vLLM's own parsers on the same corpus as the oracle.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import msgspec

from vllm_llm.text._tokenizer import TextTokenizer

__all__ = [
    "ExtractedToolCalls",
    "MessageDelta",
    "ParsedCall",
    "ReasoningParser",
    "ReasoningStep",
    "ToolCallDelta",
    "ToolParser",
    "random_tool_call_id",
]


def random_tool_call_id() -> str:
    """vLLM's default tool call id: `chatcmpl-tool-` and 16 random hex digits."""
    return f"chatcmpl-tool-{uuid.uuid4().int & 0xFFFF_FFFF_FFFF_FFFF:016x}"


class ParsedCall(msgspec.Struct, kw_only=True):
    """One whole function call: its name and its arguments as JSON text."""

    name: str
    arguments: str
    id: str | None = None
    """As vLLM's parser sets it: a random id (`random_tool_call_id`) for most formats, the format's own
    for some (e.g. Kimi K2's `functions.NAME:IDX`); None where vLLM's serving layer assigns one."""


class ExtractedToolCalls(msgspec.Struct, kw_only=True):
    """What a tool parser found in a whole output (vLLM's ExtractedToolCallInformation)."""

    called: bool
    calls: list[ParsedCall] = msgspec.field(default_factory=list)
    content: str | None = None


class ToolCallDelta(msgspec.Struct, kw_only=True):
    """A piece of one streamed tool call (vLLM's DeltaToolCall); `arguments` is a fragment to append."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


class MessageDelta(msgspec.Struct, kw_only=True):
    """New assistant output of one stream step (vLLM's DeltaMessage)."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCallDelta] = msgspec.field(default_factory=list)


class ReasoningStep(msgspec.Struct, kw_only=True):
    """One streamed reasoning step: the delta, and whether reasoning ended in it.

    When `ended`, `delta.content` holds the content after the end marker (which the tool phase parses next)
    and `content_token_ids` its token ids (vLLM's extract_content_ids of the delta).
    """

    delta: MessageDelta | None
    ended: bool = False
    content_token_ids: list[int] = msgspec.field(default_factory=list)


class ToolParser(abc.ABC):
    """Function calls in one format. One object per choice of one request.

    Class attributes mirror vLLM's ToolParser: `supports_required_and_named` (False: forced tool choices are
    parsed in the native format, with `auto`'s parser), `structural_tag_model` (the xgrammar structural-tag
    model constraining forced calls; see `vllm_llm.parsers.constraints`), `engine_based` (vLLM's
    engine_based_streaming: the parser's own content, without incomplete call markup, is the content
    even when nothing was called), `keeps_special_tokens` (the format needs special tokens in the text: the
    request is detokenized with skip_special_tokens=False, as vLLM's adjust_request sets it).
    """

    supports_required_and_named: ClassVar[bool] = True
    structural_tag_model: ClassVar[str | None] = None
    engine_based: ClassVar[bool] = False
    keeps_special_tokens: ClassVar[bool] = False

    #: Set by `ChatParser` on each parser (how vLLM's serving layer composes it): False when a reasoning
    #: parser reads the output first (vLLM's skip_reasoning_parsing off), so that a format knowing
    #: reasoning markers may treat them as markup.
    reasoning_markup_is_text: bool = True
    #: Set by `ChatParser`: True under tool_choice "none" with tools (calls are not assembled, as in
    #: vLLM's engine parsers).
    suppress_calls: bool = False

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        self.tokenizer = tokenizer
        self.tools: list[Mapping[str, Any]] = list(tools or [])
        """The request's tools as given (`{"type": "function", "function": {...}}`)."""

    @abc.abstractmethod
    def extract(self, text: str) -> ExtractedToolCalls:
        """The calls in a whole output, and the content around them."""

    @abc.abstractmethod
    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        """One streamed step: new content and/or tool-call pieces, or None for nothing to send yet."""

    def remaining_arguments(self) -> str:
        """At the end of a stream: arguments of the last call parsed but not yet streamed (vLLM's
        get_remaining_unstreamed_args), appended to the last delta's last tool call."""
        return ""

    def finish(self) -> MessageDelta | None:
        """At the end of a stream: what an engine-based parser still holds (vLLM's finish_streaming)."""
        return None


class ReasoningParser(abc.ABC):
    """Reasoning in one format. One object per choice of one request.

    `chat_template_kwargs` are the request's (some formats read e.g. `enable_thinking` or `thinking`).
    `engine_based` mirrors vLLM's engine_based_streaming; `keeps_special_tokens`: the output is detokenized
    with special tokens kept (vLLM's adjust_request), with or without tools.
    """

    engine_based: ClassVar[bool] = False
    keeps_special_tokens: ClassVar[bool] = False

    def __init__(
        self, tokenizer: TextTokenizer, chat_template_kwargs: Mapping[str, Any] | None = None
    ) -> None:
        self.tokenizer = tokenizer
        self.chat_template_kwargs: Mapping[str, Any] = chat_template_kwargs or {}

    @abc.abstractmethod
    def extract(self, text: str) -> tuple[str | None, str | None]:
        """(reasoning, content) of a whole output."""

    @abc.abstractmethod
    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        """Whether reasoning has ended by the end of `token_ids` (asked of the prompt: a prompt that closes
        reasoning makes the whole output content). A pure function."""

    def start_after_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        """Called before the first `feed` when the prompt leaves reasoning open (vLLM's
        adjust_initial_state_from_prompt)."""
        return None

    @abc.abstractmethod
    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        """One streamed step while reasoning is open."""

    def fallback_content(self) -> str | None:
        """At the end of a stream whose reasoning never ended: text to send as content after all (vLLM's
        get_streaming_fallback_content), or None."""
        return None

    def finish(self) -> MessageDelta | None:
        """At the end of a stream whose reasoning never ended: what an engine-based parser still holds."""
        return None

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """How many of the output's tokens are reasoning (usage's reasoning_tokens)."""
        return 0
