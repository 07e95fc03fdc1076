"""`OutputChannel`: the per-request hand-off from an engine loop to a `GenerateStream`.

The producer never blocks. When the reader falls behind, consecutive outputs still waiting in the
channel are coalesced into one (token ids and logprobs concatenated, the finish reason and transfer
params carried once, last); the first output is never held back and nothing is reordered or lost.
A reader either awaits the outputs (`get`, `async for`) or, having called `listen`, is told when there
is something to `take` (no task waits per output).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from vllm_llm.wire import GenerateOutput


def merge_outputs(a: GenerateOutput, b: GenerateOutput) -> GenerateOutput:
    """One output equivalent to `a` followed by `b` (same request)."""
    logprobs = a.logprobs
    if b.logprobs is not None:
        logprobs = b.logprobs if logprobs is None else [*logprobs, *b.logprobs]
    return GenerateOutput(
        request_id=a.request_id,
        token_ids=[*a.token_ids, *b.token_ids] if a.token_ids else b.token_ids,
        prompt_info=a.prompt_info if a.prompt_info is not None else b.prompt_info,
        logprobs=logprobs,
        finish_reason=b.finish_reason if b.finish_reason is not None else a.finish_reason,
        stop_reason=b.stop_reason if b.finish_reason is not None else a.stop_reason,
        kv_transfer_params=b.kv_transfer_params if b.kv_transfer_params is not None else a.kv_transfer_params,
        ec_transfer_params=b.ec_transfer_params if b.ec_transfer_params is not None else a.ec_transfer_params,
        timings=b.timings if b.timings is not None else a.timings,
    )


class OutputChannel:
    """A non-blocking queue of one request's outputs, with optional coalescing."""

    __slots__ = ("_closed", "_coalesce", "_error", "_items", "_loop", "_ready", "_waiter")

    def __init__(self, *, coalesce: bool = True) -> None:
        self._items: deque[GenerateOutput] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: BaseException | None = None
        self._closed = False
        self._coalesce = coalesce
        #: The reader's loop, looked up once: `asyncio.get_running_loop` makes a getpid system call per
        #: call on Python 3.11, which shows in a gRPC worker's profile when made per output.
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Called on every `put` and `fail` instead of waking an awaiting reader (`listen`).
        self._ready: Callable[[], None] | None = None

    @property
    def closed(self) -> bool:
        """Whether the final output (or an error) was put."""
        return self._closed

    def put(self, out: GenerateOutput) -> None:
        """Hand over an output; the one with a finish reason closes the channel."""
        if self._closed:
            return
        items = self._items
        if items and self._coalesce:
            items[-1] = merge_outputs(items[-1], out)
        else:
            items.append(out)
        if out.finish_reason is not None:
            self._closed = True
        self._wake()

    def fail(self, error: BaseException) -> None:
        """End the channel with `error`, raised after the outputs already put."""
        if self._closed:
            return
        self._error = error
        self._closed = True
        self._wake()

    def listen(self, ready: Callable[[], None]) -> None:
        """Call `ready` on every `put` and `fail` from now on, and at once if something is there to take:
        the reader takes outputs with `take` when told, instead of a task awaiting each one (a reader
        awaiting `get` is no longer woken). `ready` runs in the producer's call and must not raise."""
        self._ready = ready
        if self._items or self._closed:
            ready()

    def take(self) -> GenerateOutput | None:
        """The next output without waiting, or None; raises the channel's error once the outputs before
        it are taken."""
        if self._items:
            return self._items.popleft()
        if self._error is not None:
            raise self._error
        return None

    def _wake(self) -> None:
        ready = self._ready
        if ready is not None:
            ready()
            return
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def first(self) -> BaseException | None:
        """Wait until an output or the end is there to read, taking nothing; the channel's error when
        it failed before any output, else None."""
        while not self._items and not self._closed:
            await self._wait()
        return self._error if not self._items else None

    async def get(self) -> GenerateOutput:
        """The next output; raises the channel's error once the outputs before it are read."""
        while not self._items:
            if self._error is not None:
                raise self._error
            if self._closed:
                raise StopAsyncIteration
            await self._wait()
        return self._items.popleft()

    async def _wait(self) -> None:
        """Until the next `put`, `fail` or end."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def __aiter__(self) -> OutputChannel:
        return self

    async def __anext__(self) -> GenerateOutput:
        return await self.get()
