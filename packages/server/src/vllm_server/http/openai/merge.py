"""`MergedStreams`: the deltas of several text streams (the prompts of one completion), in arrival order."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from vllm_llm import TextDelta, TextStream

__all__ = ["MergedStreams"]


class MergedStreams:
    """Yields `(stream index, delta)` until every stream ends; closing it closes (aborts) them all."""

    def __init__(self, streams: Sequence[TextStream]) -> None:
        self._streams = list(streams)
        self._open = set(range(len(self._streams)))
        self._pending: dict[asyncio.Future[TextDelta], int] = {}

    def __aiter__(self) -> MergedStreams:
        return self

    async def __anext__(self) -> tuple[int, TextDelta]:
        if len(self._streams) == 1:
            return 0, await self._streams[0].__anext__()
        while True:
            busy = set(self._pending.values())
            for index in sorted(self._open - busy):
                self._pending[asyncio.ensure_future(self._streams[index].__anext__())] = index
            if not self._pending:
                raise StopAsyncIteration
            done, _ = await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
            # One at a time, lowest stream first; the other finished reads are taken on the next calls.
            future = min(done, key=self._pending.__getitem__)
            index = self._pending.pop(future)
            try:
                return index, future.result()
            except StopAsyncIteration:
                self._open.discard(index)

    async def aclose(self) -> None:
        """Close every stream (unfinished requests are aborted), then drop the pending reads."""
        self._open.clear()
        for stream in self._streams:
            await stream.aclose()
        pending, self._pending = list(self._pending), {}
        for future in pending:
            future.cancel()
        if pending:
            await asyncio.wait(pending)
        for future in pending:
            if not future.cancelled():
                future.exception()
