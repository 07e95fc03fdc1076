"""The idle bound of a running call (`RemoteLlm.connect(idle_timeout=...)`, `CallOutputs(idle=...)`).

A stream whose server sends nothing for `idle` seconds while it is read ends with `Unavailable`, and
its call is cancelled (which aborts the request on the server); a slow reader, or a server that is
slow but never silent for that long, never trips it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.support.grpc_serving import Served, eventually, request
from tests.support.timing import MARGIN, PATIENCE
from vllm_llm import MockLlm, Unavailable
from vllm_llm.wire import FinishReason, GenerateOutput
from vllm_remote_llm import RemoteLlm
from vllm_remote_llm._call import CallOutputs
from vllm_remote_llm.protocol import ACCEPTED_KEY


class FakeCall:
    """A Generate call: `outputs` outputs, each `delay` s apart, then silence until cancelled."""

    def __init__(self, outputs: int, *, delay: float = 0.0) -> None:
        self.left = outputs
        self.delay = delay
        self.cancelled = False
        self._silence: asyncio.Future[None] | None = None

    async def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        return ((ACCEPTED_KEY, "1"),)

    async def read(self) -> GenerateOutput:
        if self.cancelled:
            raise asyncio.CancelledError  # as grpc.aio's read of a locally cancelled call
        if self.left == 0:
            self._silence = asyncio.get_running_loop().create_future()
            await self._silence  # raises CancelledError once cancelled, as grpc.aio's read does
        if self.delay:
            await asyncio.sleep(self.delay)
        self.left -= 1
        return GenerateOutput(request_id="r", token_ids=[self.left])

    def cancel(self) -> bool:
        self.cancelled = True
        if self._silence is not None:
            self._silence.cancel()
        return True


async def _started(call: FakeCall, idle: float | None) -> tuple[CallOutputs, list[CallOutputs]]:
    done: list[CallOutputs] = []
    outputs = CallOutputs(call, "r", done.append, idle=idle)
    await outputs.start(None)
    return outputs, done


async def test_a_silent_call_is_cancelled_after_the_idle_bound() -> None:
    idle = 0.2
    call = FakeCall(3)
    outputs, done = await _started(call, idle=idle)
    for _ in range(3):
        await outputs.__anext__()
    started = time.monotonic()
    with pytest.raises(Unavailable, match=r"no output from the server for 0\.2 s"):
        await asyncio.wait_for(outputs.__anext__(), PATIENCE)
    took = time.monotonic() - started
    assert idle - 0.01 < took < idle + MARGIN, took  # never before the bound (the loop's clock may round)
    assert call.cancelled and done == [outputs]
    with pytest.raises(StopAsyncIteration):
        await outputs.__anext__()


async def test_the_first_output_is_bounded_too() -> None:
    call = FakeCall(0)
    outputs, _ = await _started(call, idle=0.1)
    with pytest.raises(Unavailable, match="idle timeout"):
        await asyncio.wait_for(outputs.__anext__(), 0.1 + MARGIN)
    assert call.cancelled


async def test_a_slow_reader_never_trips_it() -> None:
    """Only the time spent waiting in a read counts: outputs arriving meanwhile are not silence."""
    call = FakeCall(4)
    outputs, _ = await _started(call, idle=0.05)
    for _ in range(4):
        await asyncio.sleep(0.15)  # three times the bound between reads
        await outputs.__anext__()
    assert not call.cancelled


async def test_the_bound_is_per_output_not_per_stream() -> None:
    """Outputs 60 ms apart under a 150 ms bound: the stream runs far longer than the bound, untouched."""
    call = FakeCall(12, delay=0.06)
    outputs, _ = await _started(call, idle=0.15)
    started = time.monotonic()
    for _ in range(12):
        await outputs.__anext__()
    assert time.monotonic() - started > 0.6
    assert not call.cancelled


async def test_no_bound_means_no_watchdog() -> None:
    call = FakeCall(1)
    outputs, _ = await _started(call, idle=None)
    await outputs.__anext__()
    reading = asyncio.ensure_future(outputs.__anext__())
    await asyncio.sleep(0.3)  # the silence itself: no watchdog ends the read meanwhile
    assert not reading.done() and not call.cancelled
    outputs.abort()
    assert (await reading).finish_reason == FinishReason.ABORT


# ---- through gRPC: a server whose Llm stops producing (its transport still answers pings) -----------


async def test_a_stalled_engine_mid_stream_ends_the_stream_with_unavailable(
    mock: MockLlm, served: Served
) -> None:
    idle = 0.3
    remote = await RemoteLlm.connect(served.target, idle_timeout=idle, connect_timeout=10)
    try:
        stream = await remote.generate(request("stalled", max_tokens=100_000))
        for _ in range(5):
            await stream.__anext__()
        mock.pause()  # keeps the request, stops stepping: the worker is up, its engine silent
        started = time.monotonic()
        with pytest.raises(Unavailable, match=r"for 0\.3 s"):
            await asyncio.wait_for(_drain(stream), PATIENCE)  # what was in flight, then the silence
        # Soon after the bound: without it the stream would wait as long as the pause lasts.
        assert time.monotonic() - started < idle + MARGIN
        await eventually(lambda: mock.aborted == ["stalled"], what="the request aborted on the server")
        mock.resume()
        outputs = [o async for o in await remote.generate(request("after", max_tokens=3))]
        assert outputs[-1].finish_reason == FinishReason.LENGTH
    finally:
        await remote.shutdown()


async def test_a_pause_shorter_than_the_bound_loses_nothing(mock: MockLlm, served: Served) -> None:
    pause = 0.5
    remote = await RemoteLlm.connect(served.target, idle_timeout=pause + MARGIN, connect_timeout=10)
    try:
        stream = await remote.generate(request("paused", max_tokens=200))
        first = await stream.__anext__()
        mock.pause()
        await asyncio.sleep(pause)  # the pause itself is the scenario, shorter than the bound
        mock.resume()
        rest = [o async for o in stream]
        assert sum(len(o.token_ids) for o in [first, *rest]) == 200
        assert rest[-1].finish_reason == FinishReason.LENGTH
    finally:
        await remote.shutdown()


async def _drain(stream: AsyncIterator[GenerateOutput]) -> None:
    async for _ in stream:
        pass


async def test_a_non_positive_idle_timeout_is_refused(served: Served) -> None:
    with pytest.raises(ValueError, match="idle_timeout"):
        await RemoteLlm.connect(served.target, idle_timeout=0, connect_timeout=10)
