"""`ChatParser`: a reasoning parser and a tool parser composed as vLLM's serving layer composes them
(vLLM's DelegatingParser): reasoning first; tool calls parsed in the content after reasoning; `tool_choice`
applied (`none`: no calls; named and `required`: the constrained JSON output read as calls, unless the
format parses forced calls natively; `auto`: the format's parser)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from vllm_llm.parsers._base import (
    MessageDelta,
    ParsedCall,
    ReasoningParser,
    ToolParser,
)
from vllm_llm.parsers.forced import NamedCallStream, RequiredCallStream, parse_required
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["ChatParser", "NamedToolChoice", "ParsedMessage", "ToolChoice"]


class NamedToolChoice(msgspec.Struct, kw_only=True, frozen=True):
    """`tool_choice: {"type": "function", "function": {"name": ...}}`."""

    name: str


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class ParsedMessage(msgspec.Struct, kw_only=True):
    """A whole output parsed: `tool_calls` is None where vLLM's parser returns None (auto found none)."""

    reasoning: str | None
    content: str | None
    tool_calls: list[ParsedCall] | None


class ChatParser:
    """Parses one choice of one request. `tool_parser` is None unless auto tool choice is enabled."""

    def __init__(
        self,
        *,
        tokenizer: TextTokenizer,
        tool_parser: type[ToolParser] | None,
        reasoning_parser: type[ReasoningParser] | None,
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: ToolChoice | None,
        include_reasoning: bool = True,
        chat_template_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        self.tool_choice = tool_choice
        self.include_reasoning = include_reasoning
        self.reasoning = (
            reasoning_parser(tokenizer, chat_template_kwargs) if reasoning_parser is not None else None
        )
        self.tools = tool_parser(tokenizer, tools) if tool_parser is not None else None
        if self.tools is not None:
            self.tools.reasoning_markup_is_text = self.reasoning is None
            self.tools.suppress_calls = tool_choice == "none" and bool(tools)
        self._engine_based = (self.reasoning is None or self.reasoning.engine_based) and (
            self.tools is None or self.tools.engine_based
        )
        self._forced = self.tools is not None and self.tools.supports_required_and_named
        self._reasoning_ended = self.reasoning is None
        self._prompt_checked = False
        self._named: NamedCallStream | None = None
        self._required: RequiredCallStream | None = None

    # ---- whole ----------------------------------------------------------------------------------------

    def parse(self, text: str) -> ParsedMessage:
        """Reasoning, content and calls of a whole output (vLLM's Parser.parse)."""
        reasoning: str | None = None
        content: str | None = text
        if self.reasoning is not None:
            reasoning, content = self.reasoning.extract(text)
        calls, content = self._calls(content)
        if not self.include_reasoning:
            reasoning = None
        return ParsedMessage(reasoning=reasoning, content=content, tool_calls=calls)

    def _calls(self, content: str | None) -> tuple[list[ParsedCall] | None, str | None]:
        tools = self.tools
        if tools is None:
            return [], content
        choice = self.tool_choice
        if choice == "none":
            if self._engine_based:
                return [], tools.extract(content or "").content
            return [], content
        named = isinstance(choice, NamedToolChoice)
        if named and self._forced:
            assert isinstance(choice, NamedToolChoice)
            if content is None or not content.strip():
                return [], None
            return [ParsedCall(name=choice.name, arguments=content)], None
        if choice == "required" and self._forced:
            return parse_required(content or ""), None
        # auto, or a forced choice the format parses natively
        found = tools.extract(content if content is not None else "")
        if found.called:
            rest = found.content
            if rest and rest.strip() == "":
                rest = None
            return list(found.calls), rest
        if (named or choice == "required") and (content is None or not content.strip()):
            return [], None
        if self._engine_based:
            return None, found.content or None
        return None, content

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """How many of the output's tokens are reasoning."""
        return self.reasoning.count_reasoning_tokens(token_ids) if self.reasoning is not None else 0

    # ---- streamed -------------------------------------------------------------------------------------

    def start(self, prompt_token_ids: Sequence[int]) -> None:
        """Before the first `feed`: whether the prompt already ended reasoning."""
        self._prompt_checked = True
        if self.reasoning is None or self.reasoning.is_reasoning_end(prompt_token_ids):
            self._reasoning_ended = True
        else:
            self.reasoning.start_after_prompt(prompt_token_ids)

    def feed(self, delta_text: str, delta_token_ids: Sequence[int], *, finished: bool) -> MessageDelta | None:
        """One streamed step of this choice (vLLM's Parser.parse_delta); `finished` on its last step."""
        if not self._prompt_checked:
            self.start(())
        delta: MessageDelta | None = None
        transitioned = False
        text, ids = delta_text, list(delta_token_ids)
        if not self._reasoning_ended:
            assert self.reasoning is not None
            step = self.reasoning.feed(text, ids)
            delta = step.delta
            if step.ended:
                self._reasoning_ended = transitioned = True
                text = (delta.content if delta is not None else None) or ""
                ids = list(step.content_token_ids)
                if self.tools is not None and delta is not None:
                    delta.content = None  # the tool phase parses it
        if self.tools is not None and self._reasoning_ended:
            reasoning = delta.reasoning if delta is not None else None
            delta = self._tool_step(text, ids)
            if reasoning:
                if delta is None:
                    delta = MessageDelta(reasoning=reasoning)
                elif not delta.reasoning:
                    delta.reasoning = reasoning
        if delta is None and not transitioned and self._reasoning_ended and self.tools is None:
            delta = MessageDelta(content=text)
        if finished:
            delta = self._finish(delta)
        if delta is not None and not self.include_reasoning:
            delta.reasoning = None
            if not delta.content and not delta.tool_calls:
                delta = None
        return delta

    def _tool_step(self, text: str, ids: list[int]) -> MessageDelta | None:
        tools = self.tools
        assert tools is not None
        choice = self.tool_choice
        if choice == "none":
            if self._engine_based:
                delta = tools.feed(text, ids)
                if delta is not None:
                    delta.tool_calls = []
                return delta
            return MessageDelta(content=text) if text else None
        if isinstance(choice, NamedToolChoice) and self._forced:
            if self._named is None:
                self._named = NamedCallStream(choice.name, index=0)
            return self._named.feed(text)
        if choice == "required" and self._forced:
            if self._required is None:
                self._required = RequiredCallStream(index=0)
            return self._required.feed(text)
        return tools.feed(text, ids)

    def _finish(self, delta: MessageDelta | None) -> MessageDelta | None:
        if not self._reasoning_ended and self.reasoning is not None:
            promoted = self.reasoning.fallback_content()
            if promoted:
                delta = delta or MessageDelta()
                delta.content = (delta.content or "") + promoted
        if self.tools is not None and delta is not None and delta.tool_calls:
            last = delta.tool_calls[-1]
            last.arguments = (last.arguments or "") + self.tools.remaining_arguments()
        for flush in self._flushes():
            if flush is None:
                continue
            if delta is None:
                delta = flush
                continue
            if flush.content:
                delta.content = (delta.content or "") + flush.content
            if flush.reasoning:
                delta.reasoning = (delta.reasoning or "") + flush.reasoning
            if flush.tool_calls:
                delta.tool_calls = [*delta.tool_calls, *flush.tool_calls]
        return delta

    def _flushes(self) -> list[MessageDelta | None]:
        out: list[MessageDelta | None] = []
        if self.reasoning is not None and self.reasoning.engine_based and not self._reasoning_ended:
            out.append(self.reasoning.finish())
        if self.tools is not None and self.tools.engine_based:
            flush = self.tools.finish()
            if flush is not None and self.tool_choice == "none":
                flush.tool_calls = []  # no calls under "none", held back or not
            out.append(flush)
        return out
