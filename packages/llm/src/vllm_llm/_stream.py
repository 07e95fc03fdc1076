"""`GenerateStream`: the delta outputs of one request, ending after the output with a finish reason.

Closing the stream before that output (explicitly, by leaving `async with`, or by dropping it) aborts
the request.

A stream over an `OutputChannel` can also be read without a task waiting on it: `listen` has the
producer say when there is something to take, and `take` takes it (a gRPC worker's GenerateMux writer
takes every request's outputs this way, once per engine step). `observe` runs a callback on each output
delivered either way (the server's metrics).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType

from vllm_llm._channel import OutputChannel
from vllm_llm.wire import GenerateOutput

AbortCallback = Callable[[], Awaitable[None]]
Observer = Callable[[GenerateOutput], None]


class GenerateStream:
    """An async iterator of `GenerateOutput` deltas for one request."""

    __slots__ = ("_done", "_observer", "_on_abort", "_outputs", "request_id")

    def __init__(
        self, request_id: str, outputs: AsyncIterator[GenerateOutput], on_abort: AbortCallback
    ) -> None:
        self.request_id = request_id
        self._outputs = outputs
        self._on_abort: AbortCallback | None = on_abort
        self._done = False
        self._observer: Observer | None = None

    @classmethod
    def of_final(cls, out: GenerateOutput) -> GenerateStream:
        """A stream of `out` alone, a final output: a request that ended before it ran (nothing to abort)."""
        assert out.finish_reason is not None

        async def one() -> AsyncIterator[GenerateOutput]:
            yield out

        return cls(out.request_id, one(), _nothing_to_abort)

    def __aiter__(self) -> GenerateStream:
        return self

    async def __anext__(self) -> GenerateOutput:
        if self._done:
            raise StopAsyncIteration
        try:
            out = await self._outputs.__anext__()
        except asyncio.CancelledError:
            raise  # the reader was cancelled, not the request: closing the stream must still abort it
        except BaseException:
            # The producer failed (or ended without a final output): nothing left to abort there.
            self._done = True
            self._on_abort = None
            raise
        if out.finish_reason is not None:
            self._done = True
            self._on_abort = None
        if self._observer is not None:
            self._observer(out)
        return out

    def observe(self, observer: Observer) -> GenerateStream:
        """Call `observer` on every output this stream delivers from now on (read or taken), after any
        observer given before; returns this stream."""
        before = self._observer
        self._observer = observer if before is None else _chain(before, observer)
        return self

    def listen(self, ready: Callable[[], None]) -> bool:
        """Have the producer call `ready` whenever an output or the end is there to `take`, and at once
        if one is already there, instead of a task awaiting each output. False when this stream cannot
        (its outputs do not come from an `OutputChannel`, or it ended): iterate it then. Once it said
        yes, read the stream with `take` only (nothing wakes a reader awaiting it). `ready` runs in the
        producer's call (an engine's output loop) and must not raise."""
        outputs = self._outputs
        if self._done or not isinstance(outputs, OutputChannel):
            return False
        outputs.listen(ready)
        return True

    def take(self) -> GenerateOutput | None:
        """The next output of a `listen`ed stream if one is there, else None (always None after the
        final output); raises the producer's error once the outputs before it were taken."""
        if self._done:
            return None
        outputs = self._outputs
        assert isinstance(outputs, OutputChannel), "take() is for a stream that accepted listen()"
        try:
            out = outputs.take()
        except BaseException:
            self._done = True
            self._on_abort = None
            raise
        if out is None:
            return None
        if out.finish_reason is not None:
            self._done = True
            self._on_abort = None
        if self._observer is not None:
            self._observer(out)
        return out

    @property
    def finished(self) -> bool:
        """Whether the final output was delivered (or the stream failed or was closed)."""
        return self._done

    async def aclose(self) -> None:
        """Close the stream; abort the request if it has not finished."""
        self._done = True
        on_abort, self._on_abort = self._on_abort, None
        if on_abort is not None:
            await on_abort()

    async def __aenter__(self) -> GenerateStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        # Dropped without being closed: abort in the background, as an async generator's finalizer would.
        on_abort = self._on_abort
        if on_abort is None:
            return
        self._on_abort = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.call_soon(_spawn, on_abort)


def _chain(first: Observer, then: Observer) -> Observer:
    def both(out: GenerateOutput) -> None:
        first(out)
        then(out)

    return both


async def _nothing_to_abort() -> None:
    return None


_BACKGROUND: set[asyncio.Task[None]] = set()


def _spawn(on_abort: AbortCallback) -> None:
    async def run() -> None:
        await on_abort()

    task = asyncio.get_running_loop().create_task(run())
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)
