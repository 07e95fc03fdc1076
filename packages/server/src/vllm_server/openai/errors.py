"""vLLM's wording for errors clients recognise: a prompt longer than the context, a failed generation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vllm_llm import LlmError, PromptTooLong
from vllm_server.errors import RequestError

__all__ = ["check_finish", "vllm_wording"]


def check_finish(finish_reason: str | None) -> None:
    """An `error` finish fails the request, as vLLM's GenerationError (HTTP 500, "Internal server error")."""
    if finish_reason == "error":
        raise LlmError("Internal server error")


@contextmanager
def vllm_wording() -> Iterator[None]:
    """Re-raise `PromptTooLong` with vLLM's "maximum context length" message (clients match on it)."""
    try:
        yield
    except PromptTooLong as exc:
        which = (
            "exceeds this limit even without any output tokens"
            if exc.prompt_len > exc.max_model_len
            else "leaves no room for any output tokens"
        )
        raise RequestError(
            f"This model's maximum context length is {exc.max_model_len} tokens. However, your prompt "
            f"contains {exc.prompt_len} input tokens, which {which}. Please reduce the length of the "
            "input prompt.",
            param="input_tokens",
        ) from exc
