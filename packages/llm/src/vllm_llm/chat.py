"""`ChatLlm`: chat messages in, assistant deltas out, over a `TextLlm`.

Messages are rendered with the tokenizer's chat template (tokenizer_config.json "chat_template" or
chat_template.jinja) in transformers' sandboxed Jinja environment, then tokenized without special tokens
(the template writes them), as vLLM's chat serving does. Assistant tool-call arguments given as JSON strings
(OpenAI's format) reach the template as objects, as in vLLM.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Literal

import msgspec

from vllm_llm._text_chat_template import render_chat_template
from vllm_llm.text import (
    FinishReasonName,
    TextLlm,
    TextRequest,
    TextSamplingParams,
    TextStream,
    TextUsage,
    TokenLogprobs,
)
from vllm_llm.wire import LoraRequest

__all__ = [
    "ChatChoice",
    "ChatDelta",
    "ChatLlm",
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "ChatStream",
    "FunctionCall",
    "RenderedChat",
    "TextPart",
    "ToolCall",
]

ContentFormat = Literal["openai", "string"]
_RESERVED = frozenset({"messages", "tools", "documents", "add_generation_prompt"})


class TextPart(msgspec.Struct, kw_only=True, tag_field="type", tag="text"):
    """A text part of a message's content."""

    text: str


class FunctionCall(msgspec.Struct, kw_only=True):
    """The function a tool call invokes; `arguments` is a JSON object text (or the object)."""

    name: str
    arguments: str | dict[str, Any] = ""


class ToolCall(msgspec.Struct, kw_only=True, tag_field="type", tag="function"):
    """An assistant's call of a function tool."""

    function: FunctionCall
    id: str | None = None


class ChatMessage(msgspec.Struct, kw_only=True):
    """One chat message (OpenAI's shape); None fields are not shown to the template."""

    role: str
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None


class ChatRequest(msgspec.Struct, kw_only=True):
    """A conversation to continue, with sampling parameters and rendering options."""

    request_id: str
    messages: list[ChatMessage]
    params: TextSamplingParams = msgspec.field(default_factory=TextSamplingParams)
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    tools: list[dict[str, Any]] | None = None
    """JSON schemas of the tools, as given to the template."""
    documents: list[dict[str, Any]] | None = None
    chat_template: str | None = None
    """A template to use instead of the tokenizer's."""
    chat_template_kwargs: dict[str, Any] | None = None
    add_special_tokens: bool = False
    lora_request: LoraRequest | None = None
    cache_salt: str | None = None
    priority: int = 0
    data_parallel_rank: int | None = None
    trace_headers: dict[str, str] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    arrival_time: float | None = None


class RenderedChat(msgspec.Struct, kw_only=True, frozen=True):
    """The rendered prompt and its tokens."""

    prompt: str
    prompt_token_ids: list[int]


class ChatDelta(msgspec.Struct, kw_only=True):
    """New assistant content of one choice; the role comes on each choice's first delta."""

    index: int
    content: str
    token_ids: list[int]
    role: str | None = None
    logprobs: list[TokenLogprobs] | None = None
    finish_reason: FinishReasonName | None = None
    stop_reason: int | str | None = None
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    usage: TextUsage | None = None
    """Only on the last delta of the stream."""


class ChatChoice(msgspec.Struct, kw_only=True):
    """One whole assistant reply."""

    index: int
    role: str
    content: str
    token_ids: list[int]
    logprobs: list[TokenLogprobs] | None
    finish_reason: FinishReasonName | None
    stop_reason: int | str | None


class ChatResult(msgspec.Struct, kw_only=True):
    """A whole chat request."""

    request_id: str
    prompt: RenderedChat
    choices: list[ChatChoice]
    usage: TextUsage


class ChatStream:
    """The deltas of one chat request; closing it aborts what is left."""

    def __init__(self, prompt: RenderedChat, role: str, text: TextStream) -> None:
        self.prompt = prompt
        self.role = role
        self._text = text
        self._started: set[int] = set()

    @property
    def request_id(self) -> str:
        """The request id."""
        return self._text.request_id

    def __aiter__(self) -> ChatStream:
        return self

    async def __anext__(self) -> ChatDelta:
        d = await self._text.__anext__()
        first = d.index not in self._started
        self._started.add(d.index)
        return ChatDelta(
            index=d.index,
            content=d.text,
            token_ids=d.token_ids,
            role=self.role if first else None,
            logprobs=d.logprobs,
            finish_reason=d.finish_reason,
            stop_reason=d.stop_reason,
            prompt_logprobs=d.prompt_logprobs,
            kv_transfer_params=d.kv_transfer_params,
            usage=d.usage,
        )

    async def aclose(self) -> None:
        """Close the stream; unfinished choices are aborted."""
        await self._text.aclose()

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def collect(self) -> ChatResult:
        """Read the stream to its end and assemble the replies."""
        result = await self._text.collect()
        choices = [
            ChatChoice(
                index=c.index,
                role=self.role,
                content=c.text,
                token_ids=c.token_ids,
                logprobs=c.logprobs,
                finish_reason=c.finish_reason,
                stop_reason=c.stop_reason,
            )
            for c in result.choices
        ]
        return ChatResult(
            request_id=result.request_id, prompt=self.prompt, choices=choices, usage=result.usage
        )


class ChatLlm:
    """Chat over a `TextLlm` (see the module docstring)."""

    def __init__(
        self,
        text: TextLlm,
        *,
        chat_template: str | None = None,
        content_format: ContentFormat = "openai",
        response_role: str = "assistant",
    ) -> None:
        self.text = text
        self._chat_template = chat_template
        self._content_format = content_format
        self._response_role = response_role

    def render(self, request: ChatRequest) -> RenderedChat:
        """The prompt text and token ids of `request`'s conversation; raises `InvalidRequest`."""
        tokenizer = self.text.tokenizer
        template = request.chat_template or self._chat_template
        if template is None:
            template = tokenizer.get_chat_template(has_tools=bool(request.tools))
        variables = {**tokenizer.special_tokens_map, **(request.chat_template_kwargs or {})}
        prompt = render_chat_template(
            template,
            [self._message_dict(m) for m in request.messages],
            tools=request.tools,
            documents=request.documents,
            add_generation_prompt=request.add_generation_prompt,
            continue_final_message=request.continue_final_message,
            variables={k: v for k, v in variables.items() if k not in _RESERVED},
        )
        ids = tokenizer.encode(prompt, add_special_tokens=request.add_special_tokens)
        return RenderedChat(prompt=prompt, prompt_token_ids=ids)

    async def generate(self, request: ChatRequest) -> ChatStream:
        """Render, tokenize and submit `request`; return the stream of its deltas."""
        rendered = self.render(request)
        text = await self.text.generate(
            TextRequest(
                request_id=request.request_id,
                prompt=rendered.prompt_token_ids,
                params=request.params,
                lora_request=request.lora_request,
                cache_salt=request.cache_salt,
                priority=request.priority,
                data_parallel_rank=request.data_parallel_rank,
                trace_headers=request.trace_headers,
                kv_transfer_params=request.kv_transfer_params,
                arrival_time=request.arrival_time,
            )
        )
        return ChatStream(rendered, self._role(request), text)

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Generate and collect the whole result."""
        return await (await self.generate(request)).collect()

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort chat requests by id."""
        await self.text.abort(request_ids)

    def _role(self, request: ChatRequest) -> str:
        # vLLM: the response role when a generation prompt is added, else the last message's role.
        if request.add_generation_prompt or not request.messages:
            return self._response_role
        return request.messages[-1].role

    def _message_dict(self, message: ChatMessage) -> dict[str, Any]:
        data: dict[str, Any] = _drop_none(msgspec.to_builtins(message))
        content = data.get("content")
        if self._content_format == "string" and isinstance(content, list):
            data["content"] = "\n".join(str(p["text"]) for p in content)
        calls = data.get("tool_calls")
        if calls is not None and message.role == "assistant":
            if not calls:
                del data["tool_calls"]
            for call in calls:
                call["function"]["arguments"] = _arguments(call["function"].get("arguments"))
        return data


def _drop_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value


def _arguments(arguments: object) -> dict[str, Any]:
    """A tool call's arguments as an object, as vLLM's `_postprocess_messages` (invalid JSON: {})."""
    if not arguments:
        return {}
    parsed: object = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            parsed = None
    return parsed if isinstance(parsed, dict) else {}
