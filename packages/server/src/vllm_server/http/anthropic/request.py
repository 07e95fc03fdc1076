"""The bodies of `POST /v1/messages` and `/v1/messages/count_tokens` (vLLM's Anthropic protocol models).

Decoding refuses what vLLM's pydantic models refuse (unknown block types, a missing `max_tokens`, a thinking
budget under 1024, ...); `check` runs vLLM's validators that look at more than one field. Unknown fields are
ignored, as pydantic ignores them.
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

import msgspec

from vllm_server.errors import BadRequest

__all__ = [
    "ContentBlock",
    "CountTokensRequest",
    "Effort",
    "Message",
    "MessagesRequest",
    "OutputConfig",
    "Thinking",
    "ThinkingAdaptive",
    "ThinkingDisabled",
    "ThinkingEnabled",
    "Tool",
    "ToolChoice",
    "ToolDefinition",
    "ToolReference",
]

#: vLLM's VLLM_MAX_STOP_STRINGS: how many stop_sequences a request may give.
MAX_STOP_STRINGS = int(os.environ.get("VLLM_MAX_STOP_STRINGS", "4"))

BlockType = Literal[
    "text",
    "image",
    "tool_use",
    "tool_result",
    "tool_reference",
    "thinking",
    "redacted_thinking",
    "tool_addition",
    "tool_removal",
]
Effort = Literal["low", "medium", "high", "xhigh", "max"]
ThinkingDisplay = Literal["summarized", "omitted", "updates"]


class Tool(msgspec.Struct, kw_only=True):
    """A tool the model may call: a custom (function) tool with a JSON schema of its input."""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    strict: bool | None = None
    defer_loading: bool | None = None
    type: str | None = None
    """Anthropic's tool type: absent or "custom"; server tools (web search, bash, ...) are refused."""

    def check(self) -> None:
        """Refuse server tools: this server runs none of them."""
        if self.type is not None and self.type != "custom":
            raise BadRequest(
                f"tool type {self.type!r} is not supported: only custom tools with an input_schema are",
                param="tools",
            )

    @property
    def parameters(self) -> dict[str, Any]:
        """The input schema, typed "object" when it names no type (vLLM's validate_input_schema)."""
        if "type" in self.input_schema:
            return self.input_schema
        return {**self.input_schema, "type": "object"}


class ToolReference(msgspec.Struct, kw_only=True, tag_field="type", tag="tool_reference"):
    """A tool named by a tool_addition or tool_removal block."""

    name: str


class ToolDefinition(msgspec.Struct, kw_only=True, tag_field="type", tag="tool_definition"):
    """A tool defined by value in a tool_addition block."""

    definition: Tool


class ContentBlock(msgspec.Struct, kw_only=True):
    """One content block; which fields mean something depends on `type` (vLLM's AnthropicContentBlock)."""

    type: BlockType
    text: str | None = None
    source: dict[str, Any] | None = None
    id: str | None = None
    tool_use_id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    content: str | list[dict[str, Any]] | None = None
    is_error: bool | None = None
    tool_name: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    tool: ToolReference | ToolDefinition | None = None

    def check(self, role: str) -> None:
        """vLLM's checks of tool_addition / tool_removal blocks."""
        if self.type not in ("tool_addition", "tool_removal"):
            return
        if role != "system":
            raise BadRequest(
                f'{self.type} blocks are only allowed in messages with role "system"', param="messages"
            )
        if self.tool is None:
            raise BadRequest(f"tool is required for {self.type} blocks", param="messages")
        if self.type == "tool_removal" and not isinstance(self.tool, ToolReference):
            raise BadRequest("tool_removal only accepts a tool_reference", param="messages")


class Message(msgspec.Struct, kw_only=True):
    """One message of the conversation."""

    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]

    def check(self) -> None:
        """The checks of its blocks."""
        if not isinstance(self.content, str):
            for block in self.content:
                block.check(self.role)


class ToolChoice(msgspec.Struct, kw_only=True):
    """How the model must use the tools."""

    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class JsonOutputFormat(msgspec.Struct, kw_only=True):
    """output_config.format: a JSON schema the output must follow."""

    type: Literal["json_schema"] = "json_schema"
    schema: dict[str, Any] | None = None


class OutputConfig(msgspec.Struct, kw_only=True):
    """output_config: effort and format of the output."""

    effort: Effort | None = None
    format: JsonOutputFormat | None = None


class ThinkingEnabled(msgspec.Struct, kw_only=True, tag_field="type", tag="enabled"):
    """Extended thinking within a token budget (`display` is taken and ignored, as vLLM: reasoning is
    always returned)."""

    budget_tokens: Annotated[int, msgspec.Meta(ge=1024)]
    display: ThinkingDisplay | None = None


class ThinkingDisabled(msgspec.Struct, kw_only=True, tag_field="type", tag="disabled"):
    """No extended thinking."""


class ThinkingAdaptive(msgspec.Struct, kw_only=True, tag_field="type", tag="adaptive"):
    """Thinking whose depth the model chooses (`display` ignored, as vLLM)."""

    display: ThinkingDisplay | None = None


Thinking = ThinkingEnabled | ThinkingDisabled | ThinkingAdaptive


class _Conversation(msgspec.Struct, kw_only=True):
    """What both bodies carry: the conversation, its tools and how to think about it."""

    model: str
    messages: list[Message]
    system: str | list[ContentBlock] | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    thinking: Thinking | None = None
    output_config: OutputConfig | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    def check(self) -> None:
        """vLLM's validators of the conversation."""
        if not self.model:
            raise BadRequest("Model is required", param="model")
        if isinstance(self.system, list):
            for block in self.system:
                if block.type in ("tool_addition", "tool_removal"):
                    raise BadRequest(
                        f'{block.type} blocks are only allowed in messages with role "system"', param="system"
                    )
        for message in self.messages:
            message.check()
        for tool in self.tools or ():
            tool.check()
        choice = self.tool_choice
        if choice is not None and choice.type == "tool" and not choice.name:
            raise BadRequest("tool_choice.name is required when type is 'tool'", param="tool_choice")


class CountTokensRequest(_Conversation, kw_only=True):
    """Anthropic's messages.count_tokens request."""


class MessagesRequest(_Conversation, kw_only=True):
    """Anthropic's Messages request, with vLLM's extra fields."""

    max_tokens: int
    metadata: dict[str, Any] | None = None
    """Taken and unused, as vLLM (it reaches no engine parameter there either)."""
    stop_sequences: Annotated[list[str], msgspec.Meta(max_length=MAX_STOP_STRINGS)] | None = None
    stream: bool | None = False
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    mm_payload: Literal["tensors", "none"] = "tensors"
    """Ignored, as vLLM: "Ignored on regular generation endpoints" (its field description)."""
    return_mm_kwargs: bool | None = None
    """Ignored, as vLLM: a deprecated alias of mm_payload."""
    cache_salt: Annotated[str, msgspec.Meta(min_length=1, max_length=1024)] | None = None
    watermarking: bool | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, str | int | float | list[str | int | float]] | None = None

    def check(self) -> None:
        """vLLM's validators of the request."""
        super().check()
        if self.max_tokens <= 0:
            raise BadRequest("max_tokens must be positive", param="max_tokens")
        # P/D prefill legs are sent with max_tokens=1 and never decode; the decode leg is still checked.
        if self.kv_transfer_params and self.kv_transfer_params.get("do_remote_decode"):
            return
        if isinstance(self.thinking, ThinkingEnabled) and self.thinking.budget_tokens >= self.max_tokens:
            raise BadRequest("thinking.budget_tokens must be less than max_tokens", param="thinking")

    @property
    def streaming(self) -> bool:
        """Whether the response is streamed."""
        return bool(self.stream)
