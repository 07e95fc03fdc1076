"""`DelegatingLlm`: an `Llm` that forwards every call to another, for wrappers that add one concern.

A subclass overrides what it adds to (usually `generate`). `refresh_info` is forwarded when the inner
Llm has one (a `RemoteLlm` re-reads its workers' adapters), so a wrapper hides nothing a server uses.
Shutting a wrapper down does not shut the inner Llm down: it belongs to whoever made it.
"""

from __future__ import annotations

from collections.abc import Sequence

from vllm_llm._interface import Llm
from vllm_llm._stream import GenerateStream
from vllm_llm.watch import Watch
from vllm_llm.wire import GenerateRequest, LlmInfo

__all__ = ["DelegatingLlm"]


class DelegatingLlm(Llm):
    """Forwards every call to `inner`; its shutdown does not shut `inner` down."""

    def __init__(self, inner: Llm) -> None:
        self.inner = inner

    def info(self) -> LlmInfo:
        """The inner Llm's info."""
        return self.inner.info()

    def subscribe_health(self) -> Watch[bool]:
        """The inner Llm's health."""
        return self.inner.subscribe_health()

    def subscribe_readiness(self) -> Watch[bool]:
        """The inner Llm's readiness."""
        return self.inner.subscribe_readiness()

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Generate on the inner Llm."""
        return await self.inner.generate(request)

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort on the inner Llm."""
        await self.inner.abort(request_ids)

    async def refresh_info(self) -> LlmInfo:
        """The inner Llm's `refresh_info()` when it has one, else its `info()`."""
        refresh = getattr(self.inner, "refresh_info", None)
        if refresh is None:
            return self.inner.info()
        info: LlmInfo = await refresh()
        return info

    async def shutdown(self) -> None:
        """Nothing: the inner Llm belongs to someone else."""
