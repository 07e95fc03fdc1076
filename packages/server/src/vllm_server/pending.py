"""`PendingLlm`: a provided Llm that is still being connected to (a router whose workers are not up yet).

A router may start before its workers, or beside them. It listens at once and stays unready (`/ready`
503, gRPC health NOT_SERVING, requests 503) until a worker serves, then becomes the connected Llm,
whose readiness it follows from then on. Connecting is retried for as long as it takes, saying why
every time it gives up for a while (no worker answered); an answer that waiting cannot change (a worker
of an incompatible wire revision, a refused API key, a target gRPC cannot resolve) ends the wait with
that error, which the CLI reports as a failed start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from vllm_llm import GenerateStream, Llm, LlmError, Unavailable
from vllm_llm.watch import Watch, WatchSender
from vllm_llm.wire import GenerateRequest, LlmInfo

logger = logging.getLogger(__name__)


class PendingLlm(Llm):
    """An Llm that `connect()` makes, unready until it is made (see the module docstring)."""

    def __init__(self, connect: Callable[[], Awaitable[Llm]], *, what: str) -> None:
        self._connect = connect
        self._what = what
        self._inner: Llm | None = None
        self._health = WatchSender(True)
        self._ready = WatchSender(False)
        self._task: asyncio.Task[Llm] | None = None
        self._follow: asyncio.Task[None] | None = None

    @property
    def inner(self) -> Llm | None:
        """The connected Llm, once there is one."""
        return self._inner

    async def connected(self) -> Llm:
        """Connect (retrying while nothing answers) and become the connected Llm; raises the error that
        ended the wait (an `LlmError` other than `Unavailable`)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._until_connected())
        return await asyncio.shield(self._task)

    async def _until_connected(self) -> Llm:
        logger.info("waiting for %s", self._what)
        while True:
            try:
                inner = await self._connect()
                break
            except Unavailable as exc:
                logger.warning("still waiting for %s: %s", self._what, exc)
            except LlmError:
                self._health.send(False)
                raise
        self._inner = inner
        self._follow = asyncio.get_running_loop().create_task(self._follow_readiness(inner))
        logger.info("connected: %s serve", self._what)
        return inner

    async def _follow_readiness(self, inner: Llm) -> None:
        readiness = inner.subscribe_readiness()
        self._ready.send(readiness.value)
        async for ready in readiness:
            self._ready.send(ready)

    def _require(self) -> Llm:
        if self._inner is None:
            raise Unavailable(f"not connected yet: waiting for {self._what}")
        return self._inner

    # ---- the Llm interface ------------------------------------------------------------------------

    def info(self) -> LlmInfo:
        """The connected Llm's info; `Unavailable` before."""
        return self._require().info()

    async def refresh_info(self) -> LlmInfo:
        """The connected Llm's `refresh_info()` (its adapters change at runtime), else its info."""
        inner = self._require()
        refresh = getattr(inner, "refresh_info", None)
        if refresh is None:
            return inner.info()
        info: LlmInfo = await refresh()
        return info

    def subscribe_health(self) -> Watch[bool]:
        """True, unless connecting ended with an error waiting cannot change."""
        return self._health.subscribe()

    def subscribe_readiness(self) -> Watch[bool]:
        """False until connected, then the connected Llm's."""
        return self._ready.subscribe()

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Generate on the connected Llm; `Unavailable` (503) before."""
        return await self._require().generate(request)

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort on the connected Llm (nothing runs before)."""
        if self._inner is not None:
            await self._inner.abort(request_ids)

    async def shutdown(self) -> None:
        """Stop connecting, and shut the connected Llm down."""
        self._ready.send(False)
        for task in (self._task, self._follow):
            if task is not None:
                task.cancel()
        await asyncio.gather(
            *(t for t in (self._task, self._follow) if t is not None), return_exceptions=True
        )
        if self._inner is not None:
            await self._inner.shutdown()
