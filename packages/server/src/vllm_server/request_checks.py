"""Checks the HTTP and gRPC routes share, worded as vLLM words them (clients match on the text).

A prompt longer than the context, a failed generation, more output tokens than the context holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from vllm_llm import LlmError, PromptTooLong
from vllm_server.errors import BadParameter

__all__ = ["check_finish", "check_max_tokens", "vllm_wording"]


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
        raise BadParameter(
            f"This model's maximum context length is {exc.max_model_len} tokens. However, your prompt "
            f"contains {exc.prompt_len} input tokens, which {which}. Please reduce the length of the "
            "input prompt.",
            param="input_tokens",
            value=exc.prompt_len,
        ) from exc


def check_max_tokens(value: int | None, param: str, max_model_len: int) -> None:
    """vLLM's TokenizeParams check: no more output tokens than the whole context."""
    if value is not None and value > max_model_len:
        raise BadParameter(
            f"{param}={value} cannot be greater than max_model_len={max_model_len}. "
            "Please request fewer output tokens.",
            param=param,
            value=value,
        )
