"""`FanOut`: the outputs of n engine streams (the choices of one request), merged in arrival order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from vllm_llm._stream import GenerateStream
from vllm_llm.wire import GenerateOutput

__all__ = ["FanOut"]


class FanOut:
    """Reads n streams with one pending read each; yields `(index, output)` until every stream ends."""

    def __init__(self, streams: Sequence[GenerateStream]) -> None:
        self._streams = list(streams)
        self._open = set(range(len(streams)))
        self._pending: dict[asyncio.Task[GenerateOutput], int] = {}
        self._ready: list[tuple[int, GenerateOutput]] = []

    def __aiter__(self) -> FanOut:
        return self

    async def __anext__(self) -> tuple[int, GenerateOutput]:
        if len(self._streams) == 1:
            return await self._next_single()
        while not self._ready:
            self._schedule()
            if not self._pending:
                raise StopAsyncIteration
            done, _ = await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=self._pending.__getitem__):
                index = self._pending.pop(task)
                try:
                    self._ready.append((index, task.result()))
                except StopAsyncIteration:
                    self._open.discard(index)
                except BaseException:
                    await self.aclose()
                    raise
        return self._ready.pop(0)

    async def _next_single(self) -> tuple[int, GenerateOutput]:
        if not self._open:
            raise StopAsyncIteration
        try:
            return 0, await self._streams[0].__anext__()
        except StopAsyncIteration:
            self._open.clear()
            raise

    def _schedule(self) -> None:
        busy = set(self._pending.values())
        for index in sorted(self._open - busy):
            stream = self._streams[index]
            if stream.finished:
                self._open.discard(index)
                continue
            self._pending[asyncio.ensure_future(stream.__anext__())] = index

    async def close_one(self, index: int) -> None:
        """Close stream `index` (aborting its request if unfinished); its pending read is dropped."""
        self._open.discard(index)
        # Close first: a cancelled read would leave the stream believing there is nothing to abort.
        await self._streams[index].aclose()
        for task, i in list(self._pending.items()):
            if i == index:
                del self._pending[task]
                await _cancel(task)

    async def aclose(self) -> None:
        """Close every stream; unfinished requests are aborted."""
        self._open.clear()
        pending, self._pending = list(self._pending), {}
        for stream in self._streams:
            await stream.aclose()
        for task in pending:
            await _cancel(task)


async def _cancel(task: asyncio.Task[GenerateOutput]) -> None:
    task.cancel()
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved: a late failure of an abandoned read is not an error
