"""Micro-benchmark of the per-read cost of the idle bound in `CallOutputs` (not a test).

`python -m tests.remote_llm.idle_bench [N]` reads N (default 100,000) outputs from a fake call, through:
- `bare loop`: a loop of `await call.read()`, the floor for the three loops below;
- `before`: that loop with an `asyncio.timeout(None)` around every read, as `CallOutputs` had before;
- `no bound`: `CallOutputs` with `idle=None`;
- `watchdog`: `CallOutputs` with `idle=120` (one timer per call, a loop-time stamp per read);
- `timeout/read`: the bare loop with the naive scheme, an `asyncio.timeout(120)` (a timer handle)
  around every read;
- `reschedule/read`: the bare loop with one `asyncio.Timeout` per call, `reschedule`d around every read;
each with a fake read that returns at once and with one that suspends (as a real read does, on a
future the loop resolves). Prints ns per read, best of 5.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from vllm_llm.wire import FinishReason, GenerateOutput
from vllm_remote_llm._call import CallOutputs

IDLE = 120.0


class FakeCall:
    """A Generate call whose `read` yields `n` outputs, the last with a finish reason."""

    def __init__(self, n: int, *, suspend: bool) -> None:
        self._out = GenerateOutput(request_id="r", token_ids=[1])
        self._last = GenerateOutput(request_id="r", token_ids=[1], finish_reason=FinishReason.STOP)
        self._left = n
        self._suspend = suspend

    async def read(self) -> GenerateOutput:
        if self._suspend:
            loop = asyncio.get_running_loop()
            fut = loop.create_future()
            loop.call_soon(fut.set_result, None)
            await fut
        self._left -= 1
        return self._out if self._left else self._last

    def cancel(self) -> bool:
        return True

    async def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("x-vllm-accepted", "1"),)


async def _via_call_outputs(call: FakeCall, idle: float | None) -> int:
    outputs = CallOutputs(call, "r", lambda _: None, idle=idle)
    await outputs.start(None)
    n = 0
    async for _ in outputs:
        n += 1
    return n


async def _bare(call: FakeCall) -> int:
    n = 0
    while True:
        out = await call.read()
        n += 1
        if out.finish_reason is not None:
            return n


async def _before(call: FakeCall) -> int:
    n = 0
    while True:
        async with asyncio.timeout(None):
            out = await call.read()
        n += 1
        if out.finish_reason is not None:
            return n


async def _timeout_per_read(call: FakeCall) -> int:
    n = 0
    while True:
        async with asyncio.timeout(IDLE):
            out = await call.read()
        n += 1
        if out.finish_reason is not None:
            return n


async def _reschedule_per_read(call: FakeCall) -> int:
    loop = asyncio.get_running_loop()
    n = 0
    timeout = asyncio.timeout(None)
    async with timeout:
        while True:
            timeout.reschedule(loop.time() + IDLE)
            out = await call.read()
            timeout.reschedule(None)
            n += 1
            if out.finish_reason is not None:
                return n


VARIANTS: dict[str, Callable[[FakeCall], Awaitable[int]]] = {
    "bare loop": _bare,
    "before": _before,
    "no bound": lambda call: _via_call_outputs(call, None),
    "watchdog": lambda call: _via_call_outputs(call, IDLE),
    "timeout/read": _timeout_per_read,
    "reschedule/read": _reschedule_per_read,
}


def measure(n: int, *, suspend: bool, repeat: int = 5) -> dict[str, float]:
    """ns per read of each variant (best of `repeat`)."""

    async def once(variant: Callable[[FakeCall], Awaitable[Any]]) -> float:
        call = FakeCall(n, suspend=suspend)
        started = time.perf_counter()
        assert await variant(call) == n
        return (time.perf_counter() - started) / n * 1e9

    result: dict[str, float] = {}
    for name, variant in VARIANTS.items():
        result[name] = min(asyncio.run(once(variant)) for _ in range(repeat))
    return result


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    for suspend in (False, True):
        figures = measure(n, suspend=suspend)
        what = "suspending read" if suspend else "immediate read"
        print(f"{what}, {n} reads, ns/read (best of 5):")
        for name, ns in figures.items():
            base = figures["no bound" if name in ("no bound", "watchdog") else "bare loop"]
            print(f"  {name:16} {ns:8.0f}   ({ns - base:+.0f})")


if __name__ == "__main__":
    main()
