"""gRPC health (`grpc.health.v1`) whose per-service statuses follow an `Llm`'s readiness.

Every served service (and `""`, the server as a whole) is NOT_SERVING at boot, SERVING while the Llm is
ready, NOT_SERVING when readiness drops, and NOT_SERVING for good from the start of a drain. Readiness
is watched (`Llm.subscribe_readiness()`), never polled. Only the services given get a status; a `Watch`
of any other name sees SERVICE_UNKNOWN, a `Check` NOT_FOUND.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2
from grpc_health.v1.health import aio as health_aio

from vllm_llm import Watch
from vllm_server.grpc.guarded import register_proto_service

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
HEALTH_SERVICE = "grpc.health.v1.Health"


class _HealthServicer(health_aio.HealthServicer):  # type: ignore[misc]  # untyped base
    """grpcio-health-checking's aio servicer whose `Watch` streams can be ended when the server stops.

    A `Watch` never ends by itself, so without this `server.stop(grace)` would wait out the whole grace
    whenever a client (a router, a load balancer) watches.
    """

    def __init__(self) -> None:
        super().__init__()
        self._closing = False
        self._watches: dict[asyncio.Task[Any], _Recorder] = {}

    async def Watch(self, request: health_pb2.HealthCheckRequest, context: Any) -> None:
        if self._closing:
            return
        task = asyncio.current_task()
        assert task is not None
        self._watches[task] = recorder = _Recorder(context)
        try:
            await super().Watch(request, recorder)
        except asyncio.CancelledError:
            if not self._closing:
                raise
            task.uncancel()  # ended by `end_watches`: finish the call with OK, clients re-watch elsewhere
        finally:
            del self._watches[task]

    async def end_watches(self, *, within: float) -> None:
        """End every open `Watch` (and any later one) with OK, once it sent a status other than SERVING.

        Waits at most `within` seconds for the watchers to send the drain's NOT_SERVING.
        """
        self._closing = True
        watches = dict(self._watches)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                for recorder in watches.values():
                    await recorder.not_serving.wait()
        for task in watches:
            task.cancel()


class _Recorder:
    """A servicer context that notes when a `Watch` wrote a status other than SERVING."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self.not_serving = asyncio.Event()

    async def write(self, response: health_pb2.HealthCheckResponse) -> None:
        await self._context.write(response)
        if response.status != SERVING:
            self.not_serving.set()
        else:
            self.not_serving.clear()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


class LlmHealth:
    """The health service of a server whose services follow one `Llm`'s readiness."""

    _services: tuple[str, ...]
    _readiness: Watch[bool]
    _task: asyncio.Task[None] | None

    def __init__(self, readiness: Watch[bool], services: Sequence[str]) -> None:
        self._servicer = _HealthServicer()
        self._services = tuple(dict.fromkeys(("", *services)))
        self._readiness = readiness
        self._task = None

    @property
    def services(self) -> tuple[str, ...]:
        """The service names that have a status (`""` first)."""
        return self._services

    def register(self, server: grpc.aio.Server) -> None:
        """Add `grpc.health.v1.Health` to `server` (with guarded request decoding, as every service)."""
        register_proto_service(server, self._servicer, health_pb2.DESCRIPTOR.services_by_name["Health"])

    async def start(self) -> None:
        """NOT_SERVING everywhere (the aio servicer starts `""` as SERVING), then follow readiness."""
        await self._set_all(NOT_SERVING)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._follow())

    async def begin_drain(self) -> None:
        """NOT_SERVING for every service, for good."""
        await self._servicer.enter_graceful_shutdown()

    async def end_watches(self, *, within: float = 1.0) -> None:
        """End the open `Watch` streams (when the server stops), after they sent NOT_SERVING."""
        await self._servicer.end_watches(within=within)

    async def close(self) -> None:
        """Stop following readiness."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise

    async def _follow(self) -> None:
        async for ready in self._readiness:
            await self._set_all(SERVING if ready else NOT_SERVING)

    async def _set_all(self, status: Any) -> None:
        for service in self._services:
            await self._servicer.set(service, status)
