"""`input` of a Responses request as chat messages, as vLLM's construct_input_messages builds them.

`instructions` open the conversation as a system message; a string input is one user message; items:

- a message (`type` "message" or absent) with `role` and string or part content (`input_text`,
  `output_text`, `input_image`); an assistant message keeps only its first part's text, as vLLM;
- `function_call`: a tool call of the assistant message before it (merged, as vLLM merges);
- `function_call_output`: a tool message answering `call_id`;
- `reasoning`: the assistant's reasoning (its content's text, else its summary's).

Anything else is refused with vLLM's "Unsupported input item type" (or a named missing field), a 400.
"""

from __future__ import annotations

from typing import Any

from vllm_llm import ChatMessage, FunctionCall, TextPart, ToolCall
from vllm_llm.chat import ContentPart, ImageUrlPart, MediaUrl
from vllm_server.errors import BadRequest

__all__ = ["continues_final_message", "input_messages"]

_TEXT_PARTS = frozenset({"input_text", "output_text", "text"})
_PARTIAL = frozenset({"in_progress", "incomplete"})


def input_messages(instructions: str | None, items: str | list[Any]) -> list[ChatMessage]:
    """The chat messages of `instructions` and `items` (vLLM's construct_input_messages)."""
    messages: list[ChatMessage] = []
    if instructions:
        messages.append(ChatMessage(role="system", content=instructions))
    if isinstance(items, str):
        messages.append(ChatMessage(role="user", content=items))
        return messages
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"input[{i}] must be an object, got {type(item).__name__}", param="input")
        message = _message_of(i, item, messages[-1] if messages else None)
        if message is not None:
            messages.append(message)
    return messages


def continues_final_message(items: str | list[Any]) -> bool:
    """Whether the last item is a partial assistant message or reasoning (vLLM's
    should_continue_final_message): then the model continues it instead of starting a new turn."""
    if isinstance(items, str) or not items or not isinstance(items[-1], dict):
        return False
    last = items[-1]
    if last.get("type", "message") not in ("message", "reasoning"):
        return False
    return last.get("status") in _PARTIAL


def _message_of(i: int, item: dict[str, Any], prev: ChatMessage | None) -> ChatMessage | None:
    """A new message for `item`, or None when it was merged into `prev` (the assistant's last)."""
    assistant = prev if prev is not None and prev.role == "assistant" else None
    kind = item.get("type")
    if kind == "function_call":
        return _with_call(assistant, _call(i, item))
    if kind == "reasoning":
        reasoning = _reasoning_text(i, item)
        if assistant is not None and assistant.reasoning is None:
            assistant.reasoning = reasoning
            return None
        return ChatMessage(role="assistant", reasoning=reasoning)
    if kind == "function_call_output":
        call_id = _string(i, item, "call_id")
        return ChatMessage(role="tool", content=_output(i, item.get("output")), tool_call_id=call_id)
    if kind in (None, "message") and "role" in item:
        return _message(i, item, assistant)
    raise BadRequest(f"Unsupported input item type: {kind}", param="input")


def _with_call(assistant: ChatMessage | None, call: ToolCall) -> ChatMessage | None:
    if assistant is None:
        return ChatMessage(role="assistant", tool_calls=[call])
    if assistant.tool_calls is None:
        assistant.tool_calls = []
    assistant.tool_calls.append(call)
    return None


def _call(i: int, item: dict[str, Any]) -> ToolCall:
    name = _string(i, item, "name")
    namespace = item.get("namespace")
    if namespace:
        raise BadRequest(f"input[{i}]: namespaced tools are not supported by this server", param="input")
    return ToolCall(
        id=_string(i, item, "call_id"),
        function=FunctionCall(name=name, arguments=_string(i, item, "arguments")),
    )


def _reasoning_text(i: int, item: dict[str, Any]) -> str:
    if item.get("encrypted_content"):
        raise BadRequest("Encrypted content is not supported.", param="input")
    for key in ("content", "summary"):
        parts = item.get(key)
        if parts is None and key == "content":
            continue
        if not isinstance(parts, list):
            raise BadRequest(f"input[{i}].{key} must be a list of text parts", param="input")
        if parts:
            return _part_text(i, parts[0])
    return ""


def _message(i: int, item: dict[str, Any], assistant: ChatMessage | None) -> ChatMessage | None:
    role = item["role"]
    if role not in ("user", "system", "developer", "assistant"):
        raise BadRequest(f"input[{i}].role: unknown role {role!r}", param="input")
    content = item.get("content")
    if role == "assistant":
        text = content if isinstance(content, str) else None
        if isinstance(content, list):
            text = _part_text(i, content[0]) if content else None
        elif not isinstance(content, str):
            raise BadRequest(f"input[{i}].content must be a string or a list of parts", param="input")
        if text is None:
            raise BadRequest(f"input[{i}].content must not be empty", param="input")
        if assistant is not None and assistant.content is None:
            assistant.content = text
            return None
        return ChatMessage(role="assistant", content=text)
    return ChatMessage(role=role, content=_content(i, content))


def _content(i: int, content: object) -> str | list[ContentPart]:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise BadRequest(f"input[{i}].content must be a string or a list of parts", param="input")
    parts: list[ContentPart] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "input_image":
            url = part.get("image_url")
            if not isinstance(url, str):
                raise BadRequest(f"input[{i}]: an input_image needs an image_url", param="input")
            parts.append(ImageUrlPart(image_url=MediaUrl(url=url, detail=part.get("detail", "auto"))))
        else:
            parts.append(TextPart(text=_part_text(i, part)))
    return parts


def _output(i: int, output: object) -> str | list[ContentPart]:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return [TextPart(text=_part_text(i, part)) for part in output]
    raise BadRequest(f"input[{i}].output must be a string or a list of text parts", param="input")


def _part_text(i: int, part: object) -> str:
    if not isinstance(part, dict):
        raise BadRequest(f"input[{i}]: a content part must be an object", param="input")
    kind = part.get("type")
    if kind not in _TEXT_PARTS and kind not in ("reasoning_text", "summary_text"):
        raise BadRequest(f"input[{i}]: unsupported content part type {kind!r}", param="input")
    text = part.get("text")
    if not isinstance(text, str):
        raise BadRequest(f"input[{i}]: a {kind} part needs a string `text`", param="input")
    return text


def _string(i: int, item: dict[str, Any], key: str) -> str:
    value = item.get(key)
    if not isinstance(value, str):
        raise BadRequest(f"input[{i}].{key}: a string is required", param="input")
    return value
