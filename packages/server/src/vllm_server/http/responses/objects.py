"""The JSON objects of the Responses API as vLLM 0.32 dumps them: output items, usage, the response.

Ids are vLLM's: `msg_`, `rs_`, `fc_` and a random hex; a tool call without a parser-given id gets
`call_` and one (vLLM's make_tool_call_id).
"""

from __future__ import annotations

import secrets
from typing import Any

__all__ = [
    "call_id",
    "function_call_item",
    "item_id",
    "message_item",
    "reasoning_item",
    "text_part",
    "usage_json",
]


def item_id(prefix: str) -> str:
    """A fresh output item id (vLLM's f"{prefix}_{random_uuid()}")."""
    return f"{prefix}_{secrets.token_hex(16)}"


def call_id() -> str:
    """A fresh tool call id (vLLM's make_tool_call_id for the random id type)."""
    return f"call_{secrets.token_hex(12)}"


def text_part(text: str, logprobs: list[Any] | None) -> dict[str, Any]:
    """An `output_text` content part."""
    return {"annotations": [], "text": text, "type": "output_text", "logprobs": logprobs}


def message_item(id_: str, parts: list[dict[str, Any]], status: str) -> dict[str, Any]:
    """An assistant `message` output item."""
    return {"id": id_, "content": parts, "role": "assistant", "status": status, "type": "message"}


def reasoning_item(id_: str, text: str | None, status: str | None) -> dict[str, Any]:
    """A `reasoning` output item: the reasoning parser's text as its content, no summary (as vLLM)."""
    content = None if text is None else [{"text": text, "type": "reasoning_text"}]
    return {
        "id": id_,
        "summary": [],
        "type": "reasoning",
        "content": content,
        "encrypted_content": None,
        "status": status,
    }


def function_call_item(id_: str, call: str, name: str, arguments: str, status: str) -> dict[str, Any]:
    """A `function_call` output item."""
    return {
        "arguments": arguments,
        "call_id": call,
        "name": name,
        "type": "function_call",
        "id": id_,
        "namespace": None,
        "status": status,
    }


def usage_json(
    input_tokens: int, output_tokens: int, cached: int, reasoning: int, *, written: int = 0
) -> dict[str, Any]:
    """vLLM's ResponseUsage of a single-turn response (no per-turn metrics, no tool output); `written`:
    the prompt tokens computed and written to the prefix cache (its cache_write_tokens, reported with or
    without --enable-prompt-tokens-details)."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {
            "cached_tokens": cached,
            "cache_write_tokens": written,
            "input_tokens_per_turn": [],
            "cached_tokens_per_turn": [],
        },
        "output_tokens": output_tokens,
        "output_tokens_details": {
            "reasoning_tokens": reasoning,
            "tool_output_tokens": 0,
            "output_tokens_per_turn": [],
            "tool_output_tokens_per_turn": [],
        },
        "total_tokens": input_tokens + output_tokens,
    }
