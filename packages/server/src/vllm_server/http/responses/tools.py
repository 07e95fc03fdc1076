"""`tools` and `tool_choice` of a Responses request: function tools only, checked as vLLM's
check_tool_usage, handed to the chat layer in the chat-completions shape (vLLM's construct_tool_dicts).

Hosted tools (web_search, file_search, code_interpreter, mcp, ...), custom and namespace tools are refused:
this server runs no tool and has no grammar for custom tools, and a tool it would silently drop is a
request it cannot honour.
"""

from __future__ import annotations

from typing import Any

from vllm_llm import NamedToolChoice, ToolChoice
from vllm_server.errors import BadRequest
from vllm_server.http.openai.tools import ChatTool, FunctionDefinition

__all__ = ["FunctionTool", "function_tools", "resolve_tool_choice"]

_TOOL_KEYS = ("name", "parameters", "strict", "type", "description")


class FunctionTool:
    """One `{"type": "function", "name": ..., "parameters": ...}` tool."""

    __slots__ = ("chat", "echo")

    def __init__(self, chat: ChatTool, echo: dict[str, Any]) -> None:
        self.chat = chat
        self.echo = echo


def function_tools(tools: list[Any]) -> list[FunctionTool]:
    """The request's tools, each checked; anything but a function tool is refused."""
    return [_function_tool(i, tool) for i, tool in enumerate(tools)]


def _function_tool(i: int, tool: object) -> FunctionTool:
    if not isinstance(tool, dict):
        raise BadRequest(f"tools[{i}] must be an object", param="tools")
    kind = tool.get("type")
    if kind != "function":
        raise BadRequest(
            f"Tool type {kind!r} is not supported by this server: only function tools are.",
            param="tools",
        )
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise BadRequest(f"tools[{i}].name: a function tool needs a name", param="tools")
    parameters = tool.get("parameters")
    description = tool.get("description")
    strict = tool.get("strict")
    if parameters is not None and not isinstance(parameters, dict):
        raise BadRequest(f"tools[{i}].parameters must be an object", param="tools")
    if description is not None and not isinstance(description, str):
        raise BadRequest(f"tools[{i}].description must be a string", param="tools")
    if strict is not None and not isinstance(strict, bool):
        raise BadRequest(f"tools[{i}].strict must be a boolean", param="tools")
    chat = ChatTool(
        function=FunctionDefinition(name=name, description=description, parameters=parameters, strict=strict)
    )
    echo = {key: tool.get(key) for key in _TOOL_KEYS}
    return FunctionTool(chat, echo)


def resolve_tool_choice(choice: object, tools: list[FunctionTool]) -> str | dict[str, Any]:
    """`tool_choice` as vLLM's check_tool_usage leaves it: "none" for "auto" without tools; errors for a
    choice the tools cannot meet."""
    named = isinstance(choice, dict) and choice.get("type") == "function"
    if isinstance(choice, dict) and not named:
        raise BadRequest(
            f"tool_choice of type {choice.get('type')!r} is not supported by this server: only "
            '"none", "auto", "required" and {"type": "function", "name": ...} are.',
            param="tool_choice",
        )
    if not isinstance(choice, (str, dict)) or (isinstance(choice, str) and choice not in _MODES):
        raise BadRequest(f"Invalid value for `tool_choice`: {choice!r}", param="tool_choice")
    if not tools:
        if choice in ("auto", "none"):
            return "none"
        if choice == "required":
            raise BadRequest(
                "Tool choice 'required' must be specified with 'tools' parameter.", param="tool_choice"
            )
        raise BadRequest("Tool choice 'function' not found in 'tools' parameter.", param="tool_choice")
    if isinstance(choice, dict):
        name = choice.get("name")
        if not name or not any(t.chat.function.name == name for t in tools):
            raise BadRequest("Tool choice 'function' not found in 'tools' parameter.", param="tool_choice")
        return {"name": name, "type": "function"}
    return choice


_MODES = frozenset({"none", "auto", "required"})


def chat_tool_choice(choice: str | dict[str, Any]) -> ToolChoice:
    """The resolved choice for the chat layer."""
    if isinstance(choice, dict):
        return NamedToolChoice(name=choice["name"])
    return choice  # type: ignore[return-value]
