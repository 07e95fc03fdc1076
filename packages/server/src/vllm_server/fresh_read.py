"""`FreshRead`: a remote read whose every caller gets a read that started after it asked, one at a time.

A router learns its workers' LoRA adapters from their `LlmInfo` (`vllm.internal.Llm/Info`). An adapter a
worker loaded at runtime must be usable through the router at once, and one it unloaded must be gone,
as on vLLM's own server, so a request naming a model the router does not know re-reads the adapters
before it answers 404 (refresh on a miss), and so does the model list. What bounds that read:

- **Coalescing, not a time window.** A window ("at most one read per second") answers 404 for an
  adapter loaded within the window after the last read: exactly the case the read is for. Instead at
  most one read is in flight. A caller waits for a read that *started after it asked* (a read already
  in flight may have been answered before the load it wants to see); every caller that asked while a
  read ran shares the next one. A burst of misses costs at most two reads, a sustained flood of
  requests for unknown models one read at a time back to back (one Info round trip each, answered from
  memory on the worker), never one read per request nor reads in parallel. This is how an on-demand
  discovery behaves in a production proxy (Envoy's on-demand cluster and virtual-host discovery holds a
  request that names an unknown resource until one discovery round answers it, and requests that ask
  for the same resource meanwhile share that round), rather than a negative cache, which is the window
  again.
- **A failure answers too.** A read that fails (no worker answered within its bound) fails every caller
  that was waiting for it, so callers queued behind an outage do not each wait out a bound of their own.
- **A cancelled caller cancels nothing shared.** The read runs as a task of its own: a client that goes
  away does not cancel the read the others wait for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["FreshRead"]

T = TypeVar("T")


class FreshRead(Generic[T]):
    """`read()` runs `fetch` so that each caller sees a run that started after it called; one at a time."""

    def __init__(self, fetch: Callable[[], Awaitable[T]]) -> None:
        self._fetch = fetch
        #: Runs started so far; a run's number is the count once it started.
        self._started = 0
        #: The last run that ended: its number and its value or error.
        self._last: tuple[int, T | Exception] | None = None
        self._running: asyncio.Task[None] | None = None

    async def read(self) -> T:
        """The value of a run of `fetch` that started after this call (its error, if it failed)."""
        asked = self._started
        while self._last is None or self._last[0] <= asked:
            if self._running is None:
                self._started += 1
                self._running = asyncio.create_task(self._run(self._started), name="fresh read")
            await asyncio.wait((self._running,))
        outcome = self._last[1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def _run(self, number: int) -> None:
        try:
            outcome: T | Exception = await self._fetch()
        except Exception as exc:
            outcome = exc
        finally:
            self._running = None  # a cancelled run leaves no outcome: its waiters start the next one
        self._last = (number, outcome)
