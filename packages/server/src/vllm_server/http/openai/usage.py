"""OpenAI `usage` objects."""

from __future__ import annotations

from typing import Any

from vllm_llm import TextUsage

__all__ = ["usage_json", "usage_of"]


def usage_json(
    prompt_tokens: int,
    completion_tokens: int,
    cached_tokens: int = 0,
    reasoning_tokens: int | None = None,
    *,
    prompt_tokens_details: bool = False,
) -> dict[str, Any]:
    """vLLM's UsageInfo; `completion_tokens_details.reasoning_tokens` only when a reasoning parser is
    configured, and `prompt_tokens_details.cached_tokens` only with `prompt_tokens_details` (vLLM's
    --enable-prompt-tokens-details, refused by this frontend so far: vLLM's chat usage then also reports
    cache-creation and multimodal tokens, which the wire does not carry yet)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if prompt_tokens_details:
        usage["prompt_tokens_details"] = {"cached_tokens": cached_tokens}
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def usage_of(usages: list[TextUsage]) -> dict[str, Any]:
    """The usage of several text requests (the prompts of one completion request) together."""
    return usage_json(
        sum(u.prompt_tokens for u in usages),
        sum(u.completion_tokens for u in usages),
        sum(u.cached_tokens for u in usages),
    )
