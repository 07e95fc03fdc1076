"""`ChoiceLog`: one choice assembled from its deltas, and `collect_choices` for a whole stream.

Both serve the non-streaming responses.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol, TypeVar

from vllm_llm import TextUsage, TokenLogprobs
from vllm_server.http.openai.sse import Closable, close_shielded
from vllm_server.metrics import RequestMetrics
from vllm_server.request_checks import check_finish

__all__ = ["ChoiceLog", "Collected", "collect_choices"]


class Delta(Protocol):
    """What a text or chat delta carries (besides its text)."""

    @property
    def index(self) -> int: ...
    @property
    def token_ids(self) -> list[int]: ...
    @property
    def logprobs(self) -> list[TokenLogprobs] | None: ...
    @property
    def finish_reason(self) -> str | None: ...
    @property
    def stop_reason(self) -> int | str | None: ...
    @property
    def prompt_logprobs(self) -> list[TokenLogprobs | None] | None: ...
    @property
    def kv_transfer_params(self) -> dict[str, Any] | None: ...
    @property
    def usage(self) -> TextUsage | None: ...


D = TypeVar("D", bound=Delta)


class DeltaStream(Closable, Protocol[D]):  # type: ignore[misc]
    """A closable async iterator of deltas."""

    def __aiter__(self) -> AsyncIterator[D]: ...


class ChoiceLog:
    """The text, tokens, logprobs and finish of one choice, as its deltas arrive."""

    __slots__ = ("finish_reason", "logprobs", "parts", "stop_reason", "token_ids")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.token_ids: list[int] = []
        self.logprobs: list[TokenLogprobs] | None = None
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    def add(
        self,
        text: str,
        token_ids: list[int],
        logprobs: list[TokenLogprobs] | None,
        finish_reason: str | None,
        stop_reason: int | str | None,
    ) -> None:
        """Append one delta."""
        if text:
            self.parts.append(text)
        self.token_ids.extend(token_ids)
        if logprobs is not None:
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.extend(logprobs)
        if finish_reason is not None:
            self.finish_reason = finish_reason
            self.stop_reason = stop_reason

    @property
    def text(self) -> str:
        """The whole text."""
        return "".join(self.parts)


class Collected:
    """Everything one prompt's stream delivered, assembled per choice."""

    __slots__ = ("kv_transfer_params", "logs", "prompt_logprobs", "usage")

    def __init__(self, n: int) -> None:
        self.logs = [ChoiceLog() for _ in range(n)]
        self.prompt_logprobs: list[TokenLogprobs | None] | None = None
        self.kv_transfer_params: dict[str, Any] | None = None
        #: The stream's usage (on its last delta); None when it ended without one.
        self.usage: TextUsage | None = None

    @property
    def cached_tokens(self) -> int:
        """Prompt tokens served from the prefix cache."""
        return self.usage.cached_tokens if self.usage is not None else 0

    @property
    def completion_tokens(self) -> int:
        """Output tokens over all choices."""
        return sum(len(log.token_ids) for log in self.logs)


async def collect_choices(
    stream: DeltaStream[D], n: int, metrics: RequestMetrics, text_of: Callable[[D], str]
) -> Collected:
    """Read `stream` to its end (recording metrics), then close it; failed finishes raise."""
    out = Collected(n)
    reason: str | None = None
    last: str | None = None
    try:
        async for d in stream:
            check_finish(d.finish_reason)
            metrics.tokens(len(d.token_ids))
            last = d.finish_reason or last
            out.logs[d.index].add(text_of(d), d.token_ids, d.logprobs, d.finish_reason, d.stop_reason)
            if d.prompt_logprobs is not None and out.prompt_logprobs is None:
                out.prompt_logprobs = d.prompt_logprobs
            if d.kv_transfer_params is not None:
                out.kv_transfer_params = d.kv_transfer_params
            if d.usage is not None:
                out.usage = d.usage
        reason = last
    finally:
        await close_shielded(stream)
        metrics.finish(reason)
    return out
