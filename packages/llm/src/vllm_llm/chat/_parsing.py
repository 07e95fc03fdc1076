"""The chat layer's parsing options and what they do to a request, as vLLM 0.32's chat serving does them:
refusals where no parser is configured, the constraint a forced tool choice puts on the output, the
detokenization a format needs, the wire's `reasoning_ended` and `reasoning_parser_kwargs`, and one
`ChatParser` per choice."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import msgspec

from vllm_llm._errors import InvalidRequest
from vllm_llm.chat._harmony import (
    HARMONY_REASONING_PARSER,
    HARMONY_TOOL_PARSER,
    GptOssReasoningParser,
    GptOssToolParser,
    HarmonyParser,
)
from vllm_llm.parsers import (
    ChatParser,
    NamedToolChoice,
    ReasoningParser,
    ToolChoice,
    ToolParser,
    reasoning_parser_class,
    tool_parser_class,
)
from vllm_llm.parsers.constraints import tool_constraint
from vllm_llm.text._tokenizer import TextTokenizer
from vllm_llm.wire import StructuredOutputs

__all__ = ["ParserOptions", "Parsing", "ToolStrictLevel"]

ToolStrictLevel = Literal["auto", "function", "parameter"]


class ParserOptions(msgspec.Struct, kw_only=True, frozen=True):
    """vLLM's flags: `--enable-auto-tool-choice`, `--tool-call-parser`, `--reasoning-parser`,
    `--tool-strict-level`. As in vLLM, the tool parser is used only with auto tool choice enabled."""

    enable_auto_tool_choice: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    tool_strict_level: ToolStrictLevel = "auto"

    def check(self) -> None:
        """vLLM's start-up checks; raises ValueError."""
        if self.enable_auto_tool_choice and not self.tool_call_parser:
            raise ValueError("--enable-auto-tool-choice requires --tool-call-parser")
        Parsing(self)


class Parsing:
    """The resolved parser classes of a `ChatLlm`; `harmony`: the model speaks Harmony (gpt-oss), whose
    reasoning parser defaults to `openai_gptoss` as vLLM's model config defaults it."""

    def __init__(self, options: ParserOptions, *, harmony: bool = False) -> None:
        self.options = options
        self.harmony = harmony
        self.tool_parser: type[ToolParser] | None = None
        if options.enable_auto_tool_choice and options.tool_call_parser:
            self.tool_parser = _tool_parser_class(options.tool_call_parser)
        self.reasoning_parser_name = options.reasoning_parser or (
            HARMONY_REASONING_PARSER if harmony else None
        )
        self.reasoning_parser: type[ReasoningParser] | None = (
            _reasoning_parser_class(self.reasoning_parser_name) if self.reasoning_parser_name else None
        )

    def check_tokenizer(self, tokenizer: TextTokenizer, model: str) -> None:
        """vLLM's start-up check that the tokenizer has what the parsers need; raises ValueError."""
        if not self.active:
            return
        try:
            self.choice_parser(tokenizer, None, None, include_reasoning=True, chat_template_kwargs={})
        except Exception as exc:
            options = self.options
            flags = [
                f"--{flag} {name}"
                for flag, name, cls in (
                    ("tool-call-parser", options.tool_call_parser, self.tool_parser),
                    ("reasoning-parser", self.reasoning_parser_name, self.reasoning_parser),
                )
                if cls is not None
            ]
            raise ValueError(
                f"{' and '.join(flags)} cannot be used with the tokenizer of {model!r}: {exc}"
            ) from exc

    @property
    def active(self) -> bool:
        """Whether any parser runs over the output."""
        return self.tool_parser is not None or self.reasoning_parser is not None

    def check_tool_choice(self, tool_choice: ToolChoice | None) -> None:
        """vLLM's refusal of a tool choice no parser can serve (never for a Harmony model)."""
        if self.tool_parser is not None or tool_choice in (None, "none") or self.harmony:
            return
        if tool_choice == "auto":
            raise InvalidRequest(
                '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
            )
        described = (
            f'function "{tool_choice.name}"'
            if isinstance(tool_choice, NamedToolChoice)
            else f'"{tool_choice}"'
        )
        raise InvalidRequest(f"tool_choice={described} requires --tool-call-parser to be set")

    def constraint(
        self,
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: ToolChoice | None,
        parallel_tool_calls: bool | None,
        structured_outputs: StructuredOutputs | None,
    ) -> StructuredOutputs | None:
        """The request's structured-output constraint after the tool parser adjusted it."""
        parser = self.tool_parser
        if self.harmony:
            return structured_outputs  # check_harmony_request refused what vLLM constrains
        if parser is None or not tools:
            return structured_outputs
        choice: str | dict[str, Any] | None = (
            {"type": "function", "function": {"name": tool_choice.name}}
            if isinstance(tool_choice, NamedToolChoice)
            else tool_choice
        )
        return tool_constraint(
            structural_tag_model=parser.structural_tag_model,
            supports_required_and_named=parser.supports_required_and_named,
            tools=[dict(t) for t in tools],
            tool_choice=choice,
            parallel_tool_calls=parallel_tool_calls,
            structured_outputs=structured_outputs,
            strict_level=self.options.tool_strict_level,
        )

    def keeps_special_tokens(
        self, tools: Sequence[Mapping[str, Any]] | None, tool_choice: ToolChoice | None
    ) -> bool:
        """Whether the output is detokenized with special tokens kept, as vLLM's adjust_request sets it:
        always for an engine-based tool parser or a reasoning parser that asks for it, and for a tool
        format that reads special tokens when tools are on."""
        tool, reasoning = self.tool_parser, self.reasoning_parser
        if (tool is not None and tool.engine_based) or (
            reasoning is not None and reasoning.keeps_special_tokens
        ):
            return True
        return tool is not None and tool.keeps_special_tokens and bool(tools) and tool_choice != "none"

    def choice_parser(
        self,
        tokenizer: TextTokenizer,
        tools: Sequence[Mapping[str, Any]] | None,
        tool_choice: ToolChoice | None,
        include_reasoning: bool,
        chat_template_kwargs: Mapping[str, Any],
    ) -> ChatParser | None:
        """A parser for one choice, or None when no parser is configured."""
        if not self.active:
            return None
        if self.harmony:
            return HarmonyParser(
                tokenizer=tokenizer,
                tool_parser=self.tool_parser,
                reasoning_parser=self.reasoning_parser,
                tools=tools,
                tool_choice=tool_choice,
                include_reasoning=include_reasoning,
                chat_template_kwargs=chat_template_kwargs,
            )
        if _declares_harmony(self.tool_parser) or _declares_harmony(self.reasoning_parser):
            raise ValueError(
                "the openai / openai_gptoss parsers read Harmony, which this model does not speak"
            )
        return ChatParser(
            tokenizer=tokenizer,
            tool_parser=self.tool_parser,
            reasoning_parser=self.reasoning_parser,
            tools=tools,
            tool_choice=tool_choice,
            include_reasoning=include_reasoning,
            chat_template_kwargs=chat_template_kwargs,
        )


def _tool_parser_class(name: str) -> type[ToolParser]:
    """The table's tool parser, or gpt-oss's (`openai`: a declaration the Harmony parser reads)."""
    return GptOssToolParser if name == HARMONY_TOOL_PARSER else tool_parser_class(name)


def _reasoning_parser_class(name: str) -> type[ReasoningParser]:
    """The table's reasoning parser, or gpt-oss's (`openai_gptoss`)."""
    return GptOssReasoningParser if name == HARMONY_REASONING_PARSER else reasoning_parser_class(name)


def _declares_harmony(cls: type[ToolParser] | type[ReasoningParser] | None) -> bool:
    return cls is GptOssToolParser or cls is GptOssReasoningParser
