"""`Admission`: new requests prepared a few per event-loop turn, so a burst of them does not hold the loop.

Clients that send requests of equal length in a closed loop (a benchmark, an agent fleet woken by one
event) send them in waves: every request of a wave ends in the same engine step, and the next ones come
together. uvicorn reads a wave in one loop turn and starts a task per request; each task renders and
tokenizes its prompt before its first wait (0.3-0.5 ms of a Python frontend's CPU), so a wave of 32
runs for about 10 ms before anything else does. In a router that is the wave's whole preparation before
the GenerateMux writer sends the first of them to the worker (and before any running stream's next
token goes out): every request of the wave reaches the engine last, and its first token with it.

`Admission` lets `per_turn` requests start their handlers in a turn and holds the rest for the next
turns, in arrival order: the writer sends each few as they are ready, the engine admits the first
ones a step earlier, and the running streams' tokens go out between them. Measured over the real
engine (docs/performance.md, "Per request"): a router's TTFT p50 35.1 -> 29.6 ms at c=32 (the worker
alone 27.8) and 75.6 -> 69.7 ms at c=128, at the same throughput. A request that finds the turn's quota
free starts at once; one that waits costs a future. A waiter whose task was cancelled gives its place
to the next.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Admission"]


class Admission:
    """At most `per_turn` requests start their handlers per event-loop turn; the rest wait in order."""

    __slots__ = ("_per_turn", "_started", "_waiters")

    def __init__(self, per_turn: int) -> None:
        if per_turn < 1:
            raise ValueError(f"per_turn must be at least 1, not {per_turn}")
        self._per_turn = per_turn
        #: Requests started in the current turn (0: no turn is counting).
        self._started = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    def turn(self) -> asyncio.Future[None] | None:
        """None when the request may start now; else a future to await, done when its turn comes."""
        loop = asyncio.get_running_loop()
        if self._started < self._per_turn and not self._waiters:
            if self._started == 0:
                loop.call_soon(self._next_turn)  # runs in the next turn: the count starts again there
            self._started += 1
            return None
        waiter = loop.create_future()
        self._waiters.append(waiter)
        return waiter

    @property
    def waiting(self) -> int:
        """Requests waiting for a turn."""
        return len(self._waiters)

    def _next_turn(self) -> None:
        """A new turn: let the next `per_turn` waiters go (they run in the turn after this callback)."""
        started = 0
        while self._waiters and started < self._per_turn:
            waiter = self._waiters.popleft()
            if not waiter.done():  # a cancelled waiter (its client left) gives its place on
                waiter.set_result(None)
                started += 1
        self._started = started
        if started:
            asyncio.get_running_loop().call_soon(self._next_turn)
