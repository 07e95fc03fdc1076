"""Harmony, the chat format of gpt-oss models, at the caller: rendering with `openai_harmony` and parsing of
the output's channels, selected as vLLM 0.32 selects it (the model's HF config `model_type` is "gpt_oss").

Rendering (vLLM's OnlineRenderer._make_request_with_harmony): a system message (reasoning effort, the
conversation start date, instructions when VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS is set), a developer
message (instructions from a leading system/developer message, the function tools), then the conversation:
assistant reasoning to the analysis channel, assistant text to final, tool calls to commentary with the
recipient ``functions.NAME``, tool results from ``functions.NAME``; rendered for the assistant's completion
with earlier analysis dropped, prior tool-call headers in gpt-oss's legacy shape.

Parsing (vLLM's HarmonyParser): output token ids through a `StreamableParser`; the analysis channel is
reasoning, the final channel (and commentary without a recipient) is content, a message to a function
recipient is a tool call (only with a tool parser, ``--tool-call-parser openai``). The reasoning parser is
always on for these models: vLLM defaults ``--reasoning-parser`` to ``openai_gptoss`` for them.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from vllm_llm._errors import InvalidRequest
from vllm_llm.parsers import (
    ChatParser,
    ExtractedToolCalls,
    MessageDelta,
    NamedToolChoice,
    ParsedCall,
    ParsedMessage,
    ReasoningParser,
    ReasoningStep,
    ToolCallDelta,
    ToolChoice,
    ToolParser,
    random_tool_call_id,
)
from vllm_llm.text._tokenizer import TextTokenizer
from vllm_llm.wire import LlmInfo, StructuredOutputs


class _OpenAiHarmony:
    """`openai_harmony`, imported on first use: it imports pydantic, which a router without Harmony
    models must not load (the chat layer imports this module for every model)."""

    def __getattr__(self, name: str) -> Any:
        import openai_harmony  # type: ignore[import-untyped]

        return getattr(openai_harmony, name)


_oh = _OpenAiHarmony()


class HarmonyRequest(Protocol):
    """What Harmony reads of a chat request (`vllm_llm.chat.ChatRequest`, which imports this module)."""

    @property
    def messages(self) -> Sequence[Any]: ...  # ChatMessage
    @property
    def tools(self) -> list[dict[str, Any]] | None: ...
    @property
    def tool_choice(self) -> ToolChoice | None: ...
    @property
    def parallel_tool_calls(self) -> bool | None: ...
    @property
    def reasoning_effort(self) -> str | None: ...


__all__ = [
    "HARMONY_MODEL_TYPE",
    "HARMONY_REASONING_PARSER",
    "HARMONY_TOOL_PARSER",
    "GptOssReasoningParser",
    "GptOssToolParser",
    "HarmonyParser",
    "check_harmony_request",
    "harmony_encoding",
    "render_harmony",
    "uses_harmony",
]

HARMONY_MODEL_TYPE = "gpt_oss"
HARMONY_REASONING_PARSER = "openai_gptoss"
"""vLLM's reasoning parser name for gpt-oss (its default for these models)."""
HARMONY_TOOL_PARSER = "openai"
"""vLLM's tool parser name for gpt-oss."""

#: Reasoning efforts by name (openai_harmony's ReasoningEffort members).
_EFFORTS: dict[str, str] = {"high": "HIGH", "medium": "MEDIUM", "low": "LOW"}
#: Built-in tool namespaces: never function calls in a chat completion (vLLM's
#: BUILTIN_TOOL_TO_MCP_SERVER_LABEL keys).
_BUILTIN_RECIPIENTS = frozenset({"python", "browser", "container"})
_BUILTIN_TOOL_TYPES = frozenset({"web_search_preview", "code_interpreter", "container"})
_encoding: Any = None


def harmony_encoding() -> Any:
    """The gpt-oss Harmony encoding (loaded once)."""
    global _encoding
    if _encoding is None:
        _encoding = _oh.load_harmony_encoding(_oh.HarmonyEncodingName.HARMONY_GPT_OSS)
    return _encoding


def uses_harmony(info: LlmInfo) -> bool:
    """Whether the model speaks Harmony (vLLM: ``hf_config.model_type == "gpt_oss"``)."""
    return info.model_type == HARMONY_MODEL_TYPE


# ---- the parser names --------------------------------------------------------------------------------


class GptOssReasoningParser(ReasoningParser):
    """``--reasoning-parser openai_gptoss``: a capability declaration; `HarmonyParser` parses (as vLLM's)."""

    def extract(self, text: str) -> tuple[str | None, str | None]:
        raise NotImplementedError("openai_gptoss only declares reasoning; the Harmony parser parses")

    def is_reasoning_end(self, token_ids: Sequence[int]) -> bool:
        return True  # vLLM's: constraints apply from the first token (the format is channel-based)

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> ReasoningStep:
        raise NotImplementedError("openai_gptoss only declares reasoning; the Harmony parser parses")


class GptOssToolParser(ToolParser):
    """``--tool-call-parser openai``: a capability declaration; `HarmonyParser` parses (as vLLM's)."""

    supports_required_and_named: ClassVar[bool] = False

    def extract(self, text: str) -> ExtractedToolCalls:
        raise NotImplementedError("openai only declares tool calls; the Harmony parser parses")

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        raise NotImplementedError("openai only declares tool calls; the Harmony parser parses")


# ---- rendering ---------------------------------------------------------------------------------------


def check_harmony_request(
    request: HarmonyRequest,
    tool_parser: type[ToolParser] | None,
    structured_outputs: StructuredOutputs | None,
) -> None:
    """Refuse what vLLM constrains with its Harmony structural tags, which this server does not build:
    a response format, and a tool choice that forces or strictly shapes calls."""
    if structured_outputs is not None:
        raise InvalidRequest(
            "structured outputs (response_format, structured_outputs) with a Harmony (gpt-oss) model are "
            "not supported by this server",
            param="response_format",
        )
    if tool_parser is None or not request.tools:
        return
    choice = request.tool_choice
    strict = any((t.get("function") or {}).get("strict") is True for t in request.tools)
    if (
        choice == "required"
        or isinstance(choice, NamedToolChoice)
        or (choice == "auto" and (strict or request.parallel_tool_calls is False))
    ):
        raise InvalidRequest(
            "a forced or strict tool choice (tool_choice required or named, strict tools, "
            "parallel_tool_calls false) with a Harmony (gpt-oss) model is not supported by this server",
            param="tool_choice",
        )


def render_harmony(request: HarmonyRequest, *, include_tools: bool) -> list[int]:
    """The prompt token ids of `request` in Harmony (vLLM's _make_request_with_harmony)."""
    effort = request.reasoning_effort
    if effort == "none":
        raise InvalidRequest(
            f"Harmony does not support reasoning_effort={effort!r}", param="reasoning_effort"
        )
    messages = [_wire_dict(m) for m in request.messages]
    instructions: str | None = None
    if messages and messages[0]["role"] in ("system", "developer"):
        instructions = _flat_text(messages[0].get("content"))
        messages = messages[1:]
    system_instructions = instructions if _system_instructions() else None
    developer_instructions = None if _system_instructions() else instructions
    tools = request.tools if include_tools else None
    out = [_system_message(effort, system_instructions)]
    if developer_instructions or tools:
        out.append(_developer_message(developer_instructions, tools))
    try:
        out.extend(_conversation(messages))
        return _for_completion(out)
    except (ValueError, _oh.HarmonyError) as exc:  # e.g. a role Harmony has not (pydantic's is a ValueError)
        raise InvalidRequest(
            f"the conversation cannot be rendered in Harmony: {exc}", param="messages"
        ) from exc


def _system_instructions() -> bool:
    return bool(int(os.environ.get("VLLM_GPT_OSS_HARMONY_SYSTEM_INSTRUCTIONS", "0")))


def _system_message(effort: str | None, instructions: str | None) -> Any:
    content = _oh.SystemContent.new()
    if instructions is not None and _system_instructions():
        identity = content.model_identity
        content = content.with_model_identity(f"{identity}\n{instructions}" if identity else instructions)
    if effort is not None:
        if effort not in _EFFORTS:
            raise InvalidRequest(
                f"reasoning_effort={effort!r} is not supported by Harmony. Supported values are: "
                f"{', '.join(_EFFORTS)}.",
                param="reasoning_effort",
            )
        content = content.with_reasoning_effort(getattr(_oh.ReasoningEffort, _EFFORTS[effort]))
    # vLLM's non-determinism: today's date unless VLLM_SYSTEM_START_DATE pins it
    start = os.environ.get("VLLM_SYSTEM_START_DATE") or datetime.datetime.now().strftime("%Y-%m-%d")
    content = content.with_conversation_start_date(start)
    return _oh.Message.from_role_and_content(_oh.Role.SYSTEM, content)


def _developer_message(instructions: str | None, tools: Sequence[Mapping[str, Any]] | None) -> Any:
    content = _oh.DeveloperContent.new()
    if instructions is not None and not _system_instructions():
        content = content.with_instructions(instructions)
    if tools is not None:
        functions = []
        for tool in tools:
            kind = tool.get("type", "function")
            if kind in _BUILTIN_TOOL_TYPES:
                continue
            if kind != "function":
                raise InvalidRequest(f"tool type {kind!r} is not supported.", param="tools")
            function = tool.get("function") or {}
            functions.append(
                _oh.ToolDescription.new(
                    name=function.get("name", ""),
                    description=function.get("description") or "",
                    parameters=function.get("parameters"),
                )
            )
        if functions:
            content = content.with_function_tools(functions)
    return _oh.Message.from_role_and_content(_oh.Role.DEVELOPER, content)


def _conversation(messages: list[dict[str, Any]]) -> list[Any]:
    """The chat messages as Harmony messages (vLLM's parse_chat_inputs_to_harmony_messages)."""
    names = {
        call.get("id"): (call.get("function") or {}).get("name")
        for message in messages
        for call in message.get("tool_calls") or []
    }
    out: list[Any] = []
    for message in messages:
        out.extend(_harmony_messages(message, names))
    return out


def _harmony_messages(message: dict[str, Any], names: Mapping[Any, Any]) -> list[Any]:
    role = message["role"]
    calls = message.get("tool_calls") or []
    out: list[Any] = []
    if role == "assistant" and calls:
        text = _flat_text(message.get("content"))
        if text:
            out.append(_oh.Message.from_role_and_content(_oh.Role.ASSISTANT, text).with_channel("commentary"))
        if message.get("reasoning"):
            out.append(_analysis(message["reasoning"]))
        for call in calls:
            function = call.get("function") or {}
            arguments = function.get("arguments") or ""
            out.append(
                _oh.Message.from_role_and_content(_oh.Role.ASSISTANT, arguments)
                .with_channel("commentary")
                .with_recipient(f"functions.{function.get('name', '')}")
                .with_content_type("json")
            )
        return out
    if role == "tool":
        name = names.get(message.get("tool_call_id", ""), "")
        text = _flat_text(message.get("content")) or ""
        author = _oh.Author.new(_oh.Role.TOOL, f"functions.{name}")
        return [
            _oh.Message.from_author_and_content(author, text)
            .with_channel("commentary")
            .with_recipient("assistant")
        ]
    if role == "assistant" and message.get("reasoning"):
        out.append(_analysis(message["reasoning"]))
    content = message.get("content") or ""
    parts = (
        [_oh.TextContent(text=content)]
        if isinstance(content, str)
        else [_oh.TextContent(text=p.get("text", "")) for p in content]
    )
    if role == "assistant":
        if parts and parts[0].text:
            out.append(_oh.Message.from_role_and_contents(role, parts).with_channel("final"))
    elif role in ("system", "developer"):
        instructions = _flat_text(message.get("content"))
        if instructions is not None:
            if role == "system" and _system_instructions():
                out.append(_system_message(None, instructions))
            else:
                out.append(_developer_message(instructions, None))
    else:
        out.append(_oh.Message.from_role_and_contents(role, parts))
    return out


def _analysis(text: str) -> Any:
    return _oh.Message.from_role_and_content(_oh.Role.ASSISTANT, text).with_channel("analysis")


def _flat_text(content: object) -> str | None:
    """The text parts of a content, joined (vLLM's flatten_input_text_content)."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = [p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, str | dict)]
    found = [t for t in texts if t is not None]
    return "".join(found) if found else None


def _wire_dict(message: Any) -> dict[str, Any]:
    """A chat message as vLLM's Harmony rendering reads it: the request's JSON, None fields left out."""
    out: dict[str, Any] = {"role": message.role}
    content = message.content
    if isinstance(content, list):
        out["content"] = [{"type": "text", "text": p.text} if hasattr(p, "text") else {} for p in content]
    elif content is not None:
        out["content"] = content
    if message.tool_calls is not None:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.function.name,
                    "arguments": _argument_text(call.function.arguments),
                },
            }
            for call in message.tool_calls
        ]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    reasoning = message.reasoning if message.reasoning is not None else message.reasoning_content
    if reasoning is not None:
        out["reasoning"] = reasoning
    return out


def _argument_text(arguments: str | dict[str, Any]) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _for_completion(messages: list[Any]) -> list[int]:
    """Render for the assistant's next message (vLLM's render_for_completion)."""
    last_final = max(
        (i for i, m in enumerate(messages) if m.author.role == _oh.Role.ASSISTANT and m.channel == "final"),
        default=-1,
    )
    kept = [m for i, m in enumerate(messages) if not (i < last_final and m.channel == "analysis")]
    encoding = harmony_encoding()
    ids: list[int] = encoding.render_conversation_for_completion(
        _oh.Conversation.from_messages(kept),
        _oh.Role.ASSISTANT,
        config=_oh.RenderConversationConfig(auto_drop_analysis=False),
    )
    return _legacy_call_headers(ids)


def _special(text: str) -> int:
    ids: list[int] = harmony_encoding().encode(text, allowed_special="all")
    return ids[0]


def _legacy_call_headers(ids: list[int]) -> list[int]:
    """Prior assistant tool-call headers as gpt-oss writes them (vLLM's _use_legacy_tool_call_headers):
    ``assistant<|channel|>C to=R <|constrain|>T`` becomes ``assistant to=R<|channel|>C T``."""
    encoding = harmony_encoding()
    start, channel, constrain, message = (
        _special(t) for t in ("<|start|>", "<|channel|>", "<|constrain|>", "<|message|>")
    )
    out = list(ids)
    i = 0
    while i < len(out):
        if out[i] != start:
            i += 1
            continue
        try:
            end = out.index(message, i + 1)
            at_channel = out.index(channel, i + 1, end)
            at_constrain = out.index(constrain, at_channel + 1, end)
        except ValueError:
            i += 1
            continue
        author = encoding.decode(out[i + 1 : at_channel])
        channel_and_recipient: str = encoding.decode(out[at_channel + 1 : at_constrain])
        content_type = encoding.decode(out[at_constrain + 1 : end])
        if (
            author != "assistant"
            or " to=" not in channel_and_recipient
            or not channel_and_recipient.endswith(" ")
        ):
            i = end + 1
            continue
        name, recipient = channel_and_recipient[:-1].split(" to=", 1)
        if not name or not recipient or not content_type:
            i = end + 1
            continue
        header = [
            start,
            *encoding.encode(f"assistant to={recipient}"),
            channel,
            *encoding.encode(f"{name} {content_type}"),
            message,
        ]
        out[i : end + 1] = header
        i += len(header)
    return out


# ---- parsing -----------------------------------------------------------------------------------------


def _recipient(recipient: str | None) -> str | None:
    """A recipient without a constrained format older Harmony misparsed into it."""
    if recipient is None:
        return None
    cut = recipient.find("<|constrain|>")
    return recipient if cut == -1 else (recipient[:cut].rstrip() or None)


def _is_function(recipient: str | None) -> bool:
    """Whether a recipient is a function tool (vLLM's is_function_recipient, chat completions)."""
    if not recipient or recipient.startswith("<|") or recipient == "assistant":
        return False
    if recipient.startswith("functions."):
        return len(recipient) > len("functions.")
    return recipient not in _BUILTIN_RECIPIENTS and recipient.split(".", 1)[0] not in _BUILTIN_RECIPIENTS


def _kind(channel: str | None, recipient: str | None) -> str:
    if _is_function(recipient):
        return "tool"
    if channel == "analysis":
        return "reasoning"
    if channel == "final" or (channel == "commentary" and recipient is None):
        return "content"
    return "ignore"


class _Step:
    """What one output token did: the channel and recipient after it, its content delta, and the message
    it completed (if any)."""

    __slots__ = ("channel", "completed", "delta", "recipient")

    def __init__(self, channel: str | None, recipient: str | None, delta: str, completed: Any) -> None:
        self.channel = channel
        self.recipient = recipient
        self.delta = delta
        self.completed = completed


class _Channels:
    """A `StreamableParser` over output tokens, message by message (vLLM's HarmonyParser state)."""

    def __init__(self, decode: Callable[[Sequence[int]], str]) -> None:
        self._decode = decode
        self._parser: Any = None
        self._taken = 0
        self._pending: list[int] = []

    @property
    def parser(self) -> Any:
        if self._parser is None:
            self._parser = _oh.StreamableParser(harmony_encoding(), role=_oh.Role.ASSISTANT)
        return self._parser

    def recipient(self) -> str | None:
        return _recipient(self.parser.current_recipient)

    def _completed(self) -> Any:
        messages = self.parser.messages
        if len(messages) <= self._taken:
            return None
        message = messages[self._taken]
        message.recipient = _recipient(message.recipient)
        self._taken += 1
        return message

    def process(self, token_ids: Iterable[int]) -> list[_Step]:
        steps: list[_Step] = []
        for token in token_ids:
            try:
                self.parser.process(token)
            except _oh.HarmonyError:
                continue  # vLLM skips a token the parser refuses
            parser = self.parser
            delta = parser.last_content_delta or ""
            completed = self._completed()
            if completed is not None:
                self._pending.clear()
            else:
                self._pending.append(token)
            steps.append(_Step(parser.current_channel, self.recipient(), delta, completed))
        return steps

    def flush(self) -> list[_Step]:
        """The end of the output: the last message, or (the parser left mid-header) the raw tokens of the
        unfinished message as final content, as vLLM recovers them."""
        steps: list[_Step] = []
        try:
            self.parser.process_eos()
            completed = self._completed()
        except _oh.HarmonyError:
            text = self._decode(self._pending)
            steps.append(_Step("final", None, text, None))
            completed = _oh.Message.from_role_and_content(_oh.Role.ASSISTANT, text).with_channel("final")
        self._parser = None
        self._taken = 0
        self._pending.clear()
        if completed is not None:
            steps.append(_Step(completed.channel, completed.recipient, "", completed))
        return steps


def _is_reasoning_token(token: int, channel: str | None, recipient: str | None) -> bool:
    in_reasoning = channel == "analysis" or (channel == "commentary" and recipient is not None)
    return in_reasoning and not harmony_encoding().is_special_token(token)


class HarmonyParser(ChatParser):
    """Parses one choice of a Harmony model's output by channel (vLLM's HarmonyParser): whole
    (`parse_tokens`) or streamed (`feed`). `tools` is set only with ``--tool-call-parser openai``; tool
    calls are read whatever the tool choice (the caller applies it to a whole reply, as vLLM does)."""

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
        # vLLM's start-up refusal of other formats' parsers for a Harmony model
        if reasoning_parser is not None and not issubclass(reasoning_parser, GptOssReasoningParser):
            raise ValueError(f"Harmony requires GptOssReasoningParser, got {reasoning_parser.__name__}.")
        if tool_parser is not None and not issubclass(tool_parser, GptOssToolParser):
            raise ValueError(f"Harmony requires GptOssToolParser, got {tool_parser.__name__}.")
        super().__init__(
            tokenizer=tokenizer,
            tool_parser=tool_parser,
            reasoning_parser=reasoning_parser,
            tools=tools,
            tool_choice=tool_choice,
            include_reasoning=include_reasoning,
            chat_template_kwargs=chat_template_kwargs,
        )
        self._channels = _Channels(lambda ids: tokenizer.decode(ids))
        self._next_call = 0

    # ---- whole ----------------------------------------------------------------------------------------

    def parse(self, text: str) -> ParsedMessage:
        raise NotImplementedError("Harmony output is parsed from its token ids (parse_tokens)")

    def parse_tokens(self, token_ids: Sequence[int]) -> ParsedMessage:
        """Reasoning, content and calls of a whole output (vLLM's HarmonyParser.parse)."""
        channels = _Channels(self._channels._decode)
        steps = channels.process(token_ids) + channels.flush()
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[ParsedCall] = []
        for step in steps:
            message = step.completed
            if message is None or message.author.role != _oh.Role.ASSISTANT or not message.content:
                continue
            text: str = message.content[0].text
            kind = _kind(message.channel, message.recipient)
            if kind == "reasoning" and self.reasoning is not None and text:
                reasoning.append(text)
            elif kind == "content" and text:
                content.append(text)
            elif kind == "tool" and self.tools is not None:
                calls.append(
                    ParsedCall(
                        name=message.recipient.removeprefix("functions."),
                        arguments=_arguments(text, message.content_type),
                    )
                )
        return ParsedMessage(
            reasoning=("\n".join(reasoning) or None) if self.include_reasoning else None,
            content="\n".join(content) or None,
            tool_calls=calls or None,
        )

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """Output tokens in the analysis channel or addressed to a tool, special tokens aside."""
        parser = _oh.StreamableParser(harmony_encoding(), role=_oh.Role.ASSISTANT)
        count = 0
        for token in token_ids:
            try:
                parser.process(token)
            except _oh.HarmonyError:
                continue
            if _is_reasoning_token(token, parser.current_channel, _recipient(parser.current_recipient)):
                count += 1
        return count

    # ---- streamed -------------------------------------------------------------------------------------

    def start(self, prompt_token_ids: Sequence[int]) -> None:
        """Harmony outputs start a new assistant message whatever the prompt."""
        return None

    def feed(self, delta_text: str, delta_token_ids: Sequence[int], *, finished: bool) -> MessageDelta | None:
        """One streamed step (vLLM's HarmonyParser.parse_delta)."""
        channels = self._channels
        previous = channels.recipient()
        steps = channels.process(delta_token_ids)
        if finished:
            steps += channels.flush()
        content = reasoning = ""
        calls: list[ToolCallDelta] = []
        for step in steps:
            if step.completed is not None:
                previous = None
                continue
            kind = _kind(step.channel, step.recipient)
            if kind == "reasoning" and self.reasoning is not None:
                reasoning += step.delta
            elif kind == "content":
                content += step.delta
            elif kind == "tool" and self.tools is not None:
                assert step.recipient is not None
                if previous != step.recipient:
                    calls.append(
                        ToolCallDelta(
                            index=self._next_call,
                            id=random_tool_call_id(),
                            name=step.recipient.removeprefix("functions."),
                            arguments=step.delta,
                        )
                    )
                    self._next_call += 1
                    previous = step.recipient
                elif step.delta:
                    if calls:
                        calls[-1].arguments = (calls[-1].arguments or "") + step.delta
                    else:
                        calls.append(ToolCallDelta(index=self._next_call - 1, arguments=step.delta))
        if finished:
            self._next_call = 0
        if not content and not reasoning and not calls:
            return None
        delta = MessageDelta(content=content or None, reasoning=reasoning or None, tool_calls=calls)
        if not self.include_reasoning:
            delta.reasoning = None
            if not delta.content and not delta.tool_calls:
                return None
        return delta


def _arguments(text: str, content_type: str | None) -> str:
    """A call's arguments: JSON re-serialized as vLLM does (compact spacing of json.dumps), else as given."""
    if content_type is not None and "json" not in content_type:
        return text
    try:
        return json.dumps(json.loads(text))
    except json.JSONDecodeError:
        return text
