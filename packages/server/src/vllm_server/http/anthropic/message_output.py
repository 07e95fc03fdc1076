"""The `message` body of a whole `POST /v1/messages` response, and what streams share with it: usage and
the stop reason, as vLLM's AnthropicServingMessages builds them from a chat completion."""

from __future__ import annotations

import json
import uuid
from typing import Any

from vllm_llm import ChatChoice, ChatStream, TextUsage
from vllm_server.errors import BadRequest
from vllm_server.http.openai.choices import collect_choices
from vllm_server.metrics import RequestMetrics
from vllm_server.request_log import OutputLog

__all__ = ["message_response", "stop_reason", "usage_json"]


def usage_json(
    prompt_tokens: int, output_tokens: int, usage: TextUsage | None = None, *, details: bool = False
) -> dict[str, Any]:
    """Anthropic usage as vLLM's _build_anthropic_usage makes it: without `details` (its
    --enable-prompt-tokens-details) all prompt tokens are `input_tokens`; with it the cached and
    cache-creation tokens of `usage` are reported apart (a count the engine does not know left out) and
    taken out of `input_tokens`."""
    out: dict[str, Any] = {"input_tokens": prompt_tokens, "output_tokens": output_tokens}
    if not details:
        return out
    cached = usage.cached_tokens if usage is not None else 0
    created = usage.cache_creation_tokens if usage is not None else None
    out["cache_read_input_tokens"] = cached
    if created is not None:
        out["cache_creation_input_tokens"] = created
    out["input_tokens"] = max(0, prompt_tokens - cached - (created or 0))
    return out


def stop_reason(
    finish_reason: str | None, matched: int | str | None, *, tool_used: bool, tool_complete: bool
) -> tuple[str | None, str | None]:
    """(stop_reason, stop_sequence) of a chat finish (vLLM's _to_anthropic_stop_reason).

    `max_tokens` always wins; complete tool calls give `tool_use`; then a matched stop string (a str
    `matched`; a stop token id is not a sequence) gives `stop_sequence`; a call it cut short is no call."""
    if finish_reason == "length":
        return "max_tokens", None
    if finish_reason not in ("stop", "tool_calls"):
        return None, None
    if tool_complete:
        return "tool_use", None
    if isinstance(matched, str):
        return "stop_sequence", matched
    if finish_reason == "tool_calls" or tool_used:
        return "tool_use", None
    return "end_turn", None


async def message_response(
    stream: ChatStream,
    *,
    message_id: str,
    model: str,
    metrics: RequestMetrics,
    output_log: OutputLog | None = None,
    prompt_tokens_details: bool = False,
) -> dict[str, Any]:
    """Read the stream to its end, parse it whole and build the message (fields that are None left out,
    as vLLM dumps it)."""
    stream.parse_deltas = False
    got = await collect_choices(stream, 1, metrics, lambda d: d.text)
    log = got.logs[0]
    choice = stream.parse_choice(0, log.text, log.token_ids, log.logprobs, log.finish_reason, log.stop_reason)
    if output_log is not None:
        calls = [(c.function.name, c.function.arguments) for c in choice.tool_calls]
        output_log.chat_choice(
            message_id, choice.content, calls, choice.token_ids, choice.finish_reason or "stop"
        )
    called = bool(choice.tool_calls)
    reason, sequence = stop_reason(
        choice.finish_reason, choice.stop_reason, tool_used=called, tool_complete=called
    )
    body: dict[str, Any] = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": _content(choice),
        "model": model,
    }
    if reason is not None:
        body["stop_reason"] = reason
    if sequence is not None:
        body["stop_sequence"] = sequence
    prompt_tokens = len(stream.prompt.prompt_token_ids)
    body["usage"] = usage_json(prompt_tokens, got.completion_tokens, got.usage, details=prompt_tokens_details)
    if got.kv_transfer_params is not None:
        body["kv_transfer_params"] = got.kv_transfer_params
    return body


def _content(choice: ChatChoice) -> list[dict[str, Any]]:
    """thinking, text, then tool_use blocks; one empty text block when there is nothing (strict clients
    read content[0])."""
    content: list[dict[str, Any]] = []
    if choice.reasoning:
        content.append({"type": "thinking", "thinking": choice.reasoning, "signature": uuid.uuid4().hex})
    if choice.content:
        content.append({"type": "text", "text": choice.content})
    for call in choice.tool_calls:
        arguments = call.function.arguments
        content.append(
            {"type": "tool_use", "id": call.id, "name": call.function.name, "input": _tool_input(arguments)}
        )
    return content or [{"type": "text", "text": ""}]


def _tool_input(arguments: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise BadRequest(f"the model's tool call arguments are not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise BadRequest("the model's tool call arguments are not a JSON object")
    return value
