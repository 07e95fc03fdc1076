"""`ReadinessWatch`: a server's health status of `vllm.internal.Llm`, watched over the health Watch RPC.

The Watch goes through the balancing, health-checked channel with wait-for-ready, so it is placed only
on a worker that serves. When that worker stops serving (NOT_SERVING, or the stream breaks), the watch
is placed again after a backoff and lands on another serving worker, if there is one; if none serves
it waits until one does. Readiness is therefore true while any worker behind the target serves.
It turns false only after a short settle time without a serving worker, so moving the watch from one
worker to another does not flicker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence

import grpc
from grpc_health.v1 import health_pb2

from vllm_llm import Watch, WatchSender

logger = logging.getLogger(__name__)

WATCH_PATH = "/grpc.health.v1.Health/Watch"
SERVING = health_pb2.HealthCheckResponse.SERVING
UNKNOWN_STATUS_BACKOFF = 5.0


class ReadinessWatch:
    """Follows one service's health status behind a channel as a `Watch[bool]` (see the module doc)."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        service: str,
        metadata: Sequence[tuple[str, str]],
        *,
        settle: float = 0.2,
        backoff: tuple[float, float] = (0.05, 2.0),
    ) -> None:
        self._watch = channel.unary_stream(
            WATCH_PATH,
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString,
        )
        self._request = health_pb2.HealthCheckRequest(service=service)
        self._metadata = tuple(metadata)
        self._settle = settle
        self._backoff = backoff
        self._ready = WatchSender(False)
        self._seen = asyncio.Event()
        self._unready_timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None

    def subscribe(self) -> Watch[bool]:
        """Readiness: true while a worker serves the service."""
        return self._ready.subscribe()

    async def start(self, first_within: float | None) -> None:
        """Start watching; wait (at most `first_within` seconds) for the first status."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(first_within):
                await self._seen.wait()

    async def close(self) -> None:
        """Stop watching; readiness turns false."""
        self._cancel_timer()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._ready.send(False)

    async def _run(self) -> None:
        initial, maximum = self._backoff
        delay = initial
        while True:
            if await self._watch_once():
                delay = initial
            self._unready_soon()
            await asyncio.sleep(delay)
            delay = min(delay * 2, maximum)

    async def _watch_once(self) -> bool:
        """One Watch call, until the worker stops serving or the call ends; whether it ever served."""
        call = self._watch(self._request, metadata=self._metadata, wait_for_ready=True)
        served = False
        try:
            while (response := await call.read()) is not grpc.aio.EOF:
                self._seen.set()
                if response.status != SERVING:
                    return served  # look for another worker that serves
                served = True
                self._serving()
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                # No health service: serving, as gRPC's client-side health checking assumes (A17).
                self._seen.set()
                self._serving()
                await asyncio.sleep(UNKNOWN_STATUS_BACKOFF)
                return True
            logger.debug("health watch ended: %s", exc.code())
        finally:
            call.cancel()
        return served

    def _serving(self) -> None:
        self._cancel_timer()
        self._ready.send(True)

    def _unready_soon(self) -> None:
        if self._unready_timer is None and self._ready.value:
            self._unready_timer = asyncio.get_running_loop().call_later(self._settle, self._unready)

    def _unready(self) -> None:
        self._unready_timer = None
        self._ready.send(False)

    def _cancel_timer(self) -> None:
        timer, self._unready_timer = self._unready_timer, None
        if timer is not None:
            timer.cancel()
