"""OpenAI `usage` objects, and their `prompt_tokens_details` (vLLM's --enable-prompt-tokens-details)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vllm_llm import TextUsage

__all__ = ["PromptTokensDetails", "usage_json", "usage_of"]


class PromptTokensDetails:
    """vLLM's PromptTokenUsageInfo: cached and cache-creation tokens of the prompt, and (chat) its
    multimodal placeholder tokens by modality."""

    __slots__ = ("cached_tokens", "created_cache_tokens", "multimodal_tokens")

    def __init__(
        self,
        cached_tokens: int,
        created_cache_tokens: int | None = None,
        multimodal_tokens: Mapping[str, int] | None = None,
    ) -> None:
        self.cached_tokens = cached_tokens
        self.created_cache_tokens = created_cache_tokens
        self.multimodal_tokens = dict(multimodal_tokens) if multimodal_tokens else None

    @classmethod
    def of_chat(
        cls, usage: TextUsage | None, multimodal_tokens: Mapping[str, int] | None
    ) -> PromptTokensDetails:
        """A chat's (vLLM's _make_prompt_tokens_details): all three counts."""
        cached = usage.cached_tokens if usage is not None else 0
        created = usage.cache_creation_tokens if usage is not None else None
        return cls(cached, created, multimodal_tokens)

    def json(self, *, streamed: bool) -> dict[str, Any]:
        """A whole response keeps unknown counts as null (vLLM's `model_dump()`); a streamed usage chunk
        leaves them out (its `exclude_none=True`)."""
        out = {
            "cached_tokens": self.cached_tokens,
            "created_cache_tokens": self.created_cache_tokens,
            "multimodal_tokens": self.multimodal_tokens,
        }
        return {k: v for k, v in out.items() if v is not None} if streamed else out


def usage_json(
    prompt_tokens: int,
    completion_tokens: int,
    reasoning_tokens: int | None = None,
    *,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """vLLM's UsageInfo; `completion_tokens_details.reasoning_tokens` only when a reasoning parser is
    configured, `prompt_tokens_details` only when given (--enable-prompt-tokens-details)."""
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens": completion_tokens,
    }
    if details is not None:
        usage["prompt_tokens_details"] = details
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    return usage


def usage_of(usages: list[TextUsage], *, details: bool = False) -> dict[str, Any]:
    """The usage of several text requests (the prompts of one completion request) together; with
    `details`, the cached tokens of the last prompt, as vLLM's (its `last_final_res`)."""
    return usage_json(
        sum(u.prompt_tokens for u in usages),
        sum(u.completion_tokens for u in usages),
        details=PromptTokensDetails(usages[-1].cached_tokens).json(streamed=False) if details else None,
    )
