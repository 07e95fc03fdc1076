"""`tools` of a chat request as vLLM's ChatCompletionToolsParam takes them and hands them on (to the chat
template and the parsers): unknown fields dropped, `description` and `parameters` null when absent, `strict`
and `defer_loading` only when given (the function's `defer_loading` inherited from the tool's)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = ["ChatTool", "tool_dicts"]


class FunctionDefinition(msgspec.Struct, kw_only=True):
    """vLLM's FunctionDefinition."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None
    defer_loading: bool | None = None


class ChatTool(msgspec.Struct, kw_only=True):
    """vLLM's ChatCompletionToolsParam."""

    function: FunctionDefinition
    type: Literal["function"] = "function"
    defer_loading: bool | None = None

    def as_dict(self) -> dict[str, Any]:
        """The tool as vLLM's model_dump gives it."""
        fn = self.function
        function: dict[str, Any] = {
            "name": fn.name,
            "description": fn.description,
            "parameters": fn.parameters,
        }
        if fn.strict is not None:
            function["strict"] = fn.strict
        defer = fn.defer_loading if fn.defer_loading is not None else self.defer_loading
        if defer is not None:
            function["defer_loading"] = defer
        out: dict[str, Any] = {"type": "function", "function": function}
        if self.defer_loading is not None:
            out["defer_loading"] = self.defer_loading
        return out


def tool_dicts(tools: list[ChatTool] | None) -> list[dict[str, Any]] | None:
    """The tools as vLLM hands them on."""
    return None if tools is None else [t.as_dict() for t in tools]
