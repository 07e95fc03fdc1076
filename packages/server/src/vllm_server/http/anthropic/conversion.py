"""An Anthropic request as the chat completions request vLLM turns it into (its `to_chat_completion_request`),
so it is checked, lowered and served by the same chat path as `/v1/chat/completions`.

System text (top-level and, where the chat template wants the system first, inline) becomes one leading
system message; text and image blocks become content parts; thinking blocks the assistant's `reasoning`;
tool_use blocks its `tool_calls`; a user's tool_result blocks become `tool` messages (their images a user
message after them); tool_addition / tool_removal blocks change the tool list in effect.
"""

from __future__ import annotations

import json
import time
from typing import Any

from vllm_llm import ChatMessage, FunctionCall, TextPart, ToolCall
from vllm_llm.chat import ContentPart, ImageUrlPart, MediaUrl
from vllm_server.errors import BadRequest
from vllm_server.http.anthropic.request import (
    ContentBlock,
    CountTokensRequest,
    Message,
    MessagesRequest,
    ThinkingDisabled,
    ThinkingEnabled,
    Tool,
    ToolDefinition,
    ToolReference,
)
from vllm_server.http.openai import ChatCompletionRequest
from vllm_server.http.openai.sampling import JsonSchemaFormat, ResponseFormat
from vllm_server.http.openai.tools import ChatTool, FunctionDefinition

__all__ = ["chat_body"]

#: Claude Code's attribution header: a per-request hash that would defeat prefix caching (vLLM drops it).
_BILLING_HEADER = "x-anthropic-billing-header"


def chat_body(
    request: MessagesRequest | CountTokensRequest,
    *,
    merge_inline_system: bool,
    disabled_thinking_effort: str = "none",
) -> ChatCompletionRequest:
    """The chat completions request vLLM serves `request` as."""
    messages = _system_messages(request, merge_inline_system)
    for message in request.messages:
        messages += _converted(message, merge_inline_system)
    body = ChatCompletionRequest(model=request.model, messages=messages)
    body.chat_template_kwargs = request.chat_template_kwargs
    if isinstance(request, MessagesRequest):
        body.max_tokens = body.max_completion_tokens = request.max_tokens
        body.stop = request.stop_sequences
        body.temperature = request.temperature
        body.top_p = request.top_p
        body.top_k = request.top_k
        body.watermarking = request.watermarking
        body.cache_salt = request.cache_salt
        body.kv_transfer_params = request.kv_transfer_params
        body.ec_transfer_params = request.ec_transfer_params
        body.vllm_xargs = request.vllm_xargs
        body.stream = request.stream
    output = request.output_config
    if output is not None and output.format is not None and output.format.schema:
        body.response_format = ResponseFormat(
            type="json_schema", json_schema=JsonSchemaFormat(name="json_schema", schema=output.format.schema)
        )
    if output is not None and output.effort is not None:
        body.reasoning_effort = output.effort
    thinking = request.thinking
    if isinstance(thinking, ThinkingDisabled):
        # "none" clears enable_thinking for templates that honour it; a model that cannot stop thinking
        # gets a low effort instead (see `TemplateFacts.disabled_thinking_effort`).
        body.reasoning_effort = disabled_thinking_effort  # type: ignore[assignment]
    elif isinstance(thinking, ThinkingEnabled):
        body.thinking_token_budget = thinking.budget_tokens
    # "adaptive" pins nothing: the model chooses its depth.
    _apply_tool_choice(request, body)
    tools = _tools_in_effect(request)
    if tools is not None:
        body.tools = [_chat_tool(t) for t in tools]
        if body.tool_choice is None:
            body.tool_choice = "auto"
    return body


def _apply_tool_choice(request: MessagesRequest | CountTokensRequest, body: ChatCompletionRequest) -> None:
    choice = request.tool_choice
    if choice is None:
        body.tool_choice = None  # an explicit null, as vLLM sets it
        return
    body.parallel_tool_calls = not choice.disable_parallel_tool_use
    if choice.type == "tool":
        body.tool_choice = {"type": "function", "function": {"name": choice.name}}
    else:
        body.tool_choice = {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def _chat_tool(tool: Tool) -> ChatTool:
    return ChatTool(
        function=FunctionDefinition(
            name=tool.name,
            description=tool.description,
            parameters=tool.parameters,
            strict=tool.strict,
            defer_loading=tool.defer_loading,
        )
    )


def _tools_in_effect(request: MessagesRequest | CountTokensRequest) -> list[Tool] | None:
    """`tools` with the conversation's tool_addition / tool_removal blocks applied (vLLM's _resolve_tools):
    a tool added by reference is no longer deferred, one added by value is declared, a removed one dropped."""
    changes = [
        block
        for message in request.messages
        if not isinstance(message.content, str)
        for block in message.content
        if block.type in ("tool_addition", "tool_removal")
    ]
    if not changes:
        return request.tools
    tools = {tool.name: tool for tool in request.tools or ()}
    removed: set[str] = set()
    for block in changes:
        change = block.tool
        if isinstance(change, ToolDefinition):
            name = change.definition.name
            tools[name] = change.definition
        else:
            assert isinstance(change, ToolReference)  # checked with the request
            name = change.name
            if name not in tools:
                raise BadRequest(
                    f"{block.type} references tool {name!r}, which is not declared in tools", param="messages"
                )
            if block.type == "tool_addition":
                tool = tools[name]
                tools[name] = Tool(
                    name=tool.name,
                    input_schema=tool.input_schema,
                    description=tool.description,
                    strict=tool.strict,
                    type=tool.type,
                )
        if block.type == "tool_removal":
            removed.add(name)
        else:
            removed.discard(name)
    return [tool for name, tool in tools.items() if name not in removed]


def _system_messages(request: MessagesRequest | CountTokensRequest, merge_inline: bool) -> list[ChatMessage]:
    parts: list[str] = []
    system = request.system
    if isinstance(system, str):
        if system:
            parts.append(system)
    elif system:
        parts += [b.text for b in system if b.type == "text" and b.text and not _billing(b.text)]
    if merge_inline:
        for message in request.messages:
            if message.role == "system" and (text := _system_text(message)):
                parts.append(text)
    return [ChatMessage(role="system", content="".join(parts))] if parts else []


def _billing(text: str) -> bool:
    return text.startswith(_BILLING_HEADER)


def _system_text(message: Message) -> str | None:
    """The text of a system message without billing headers (None when nothing is left)."""
    if isinstance(message.content, str):
        return None if _billing(message.content) else message.content
    parts = [b.text for b in message.content if b.type == "text" and b.text and not _billing(b.text)]
    return "".join(parts) if parts else None


def _converted(message: Message, merge_inline_system: bool) -> list[ChatMessage]:
    """The chat messages of one Anthropic message (tool results come first, as their own messages)."""
    if message.role == "system":
        if merge_inline_system:
            return []
        text = _system_text(message)
        return [ChatMessage(role="system", content=text)] if text else []
    if isinstance(message.content, str):
        return [ChatMessage(role=message.role, content=message.content)]
    out: list[ChatMessage] = []
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    reasoning: list[str] = []
    for block in message.content:
        if block.type == "text" and block.text:
            parts.append(TextPart(text=block.text))
        elif block.type == "image" and block.source:
            parts.append(ImageUrlPart(image_url=MediaUrl(url=_image_url(block.source))))
        elif block.type == "thinking" and block.thinking is not None:
            reasoning.append(block.thinking)
        elif block.type == "tool_use":
            calls.append(_tool_call(block))
        elif block.type == "tool_result":
            if message.role == "user":
                out += _tool_result_messages(block)
            else:
                parts.append(TextPart(text=f"Tool result: {_python_str(block.content)}"))
        # redacted_thinking (opaque), tool_reference (expanded only inside tool results) and tool changes
        # (applied to the tool list) add nothing to the message, as in vLLM.
    converted = ChatMessage(role=message.role)
    if reasoning:
        converted.reasoning = "".join(reasoning)
    if calls:
        converted.tool_calls = calls
    if parts:
        only_text = len(parts) == 1 and isinstance(parts[0], TextPart)
        converted.content = parts[0].text if only_text else parts  # type: ignore[union-attr]
    if message.role != "user" or converted.content is not None:
        out.append(converted)
    return out


def _python_str(content: str | list[dict[str, Any]] | None) -> str:
    """vLLM's `str(block.content) if block.content else ""` (a list shows as Python shows it)."""
    return str(content) if content else ""


def _tool_call(block: ContentBlock) -> ToolCall:
    return ToolCall(
        id=block.id or f"call_{int(time.time())}",
        function=FunctionCall(name=block.name or "", arguments=json.dumps(block.input or {})),
    )


def _tool_result_messages(block: ContentBlock) -> list[ChatMessage]:
    """A user's tool result: a `tool` message with its text, then a user message with its images."""
    text = ""
    images: list[str] = []
    if isinstance(block.content, str):
        text = block.content
    elif isinstance(block.content, list):
        texts: list[str] = []
        for item in block.content:
            kind = item.get("type")
            if kind == "text":
                texts.append(_item_str(item, "text"))
            elif kind == "image":
                source = item.get("source", {})
                if not isinstance(source, dict):
                    raise BadRequest("an image in a tool_result needs a source object", param="messages")
                if url := _image_url(source):
                    images.append(url)
            elif kind == "tool_reference":
                # vLLM hands these to chat templates that expand deferred tools; this server has no
                # content part for them, so it says so rather than dropping them.
                raise BadRequest(
                    "tool_reference blocks inside tool_result content are not supported by this server",
                    param="messages",
                )
        text = "\n".join(texts)
    out = [ChatMessage(role="tool", tool_call_id=block.tool_use_id or "", content=text)]
    if images:
        out.append(
            ChatMessage(role="user", content=[ImageUrlPart(image_url=MediaUrl(url=u)) for u in images])
        )
    return out


def _item_str(item: dict[str, Any], key: str) -> str:
    value = item.get(key, "")
    if not isinstance(value, str):
        raise BadRequest(f"`{key}` of a tool_result item must be a string", param="messages")
    return value


def _image_url(source: dict[str, Any]) -> str:
    """An Anthropic image source as a URL: its `url`, or a data URL of its base64 data."""
    if source.get("type") == "url":
        return _item_str(source, "url")
    media_type = source.get("media_type", "image/jpeg")
    return f"data:{media_type};base64,{_item_str(source, 'data')}"
