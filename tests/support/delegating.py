"""`DelegatingLlm`: an opaque Llm that forwards to another (so a server over it serves no Control)."""

from __future__ import annotations

from collections.abc import Sequence

from vllm_llm import GenerateStream, Llm, Watch
from vllm_llm.wire import GenerateRequest, LlmInfo


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

    async def shutdown(self) -> None:
        """Nothing: the inner Llm belongs to someone else."""
