"""Two workers behind one `ipv4:` target: gRPC's round_robin with client-side health checking balances."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio

from tests.support.grpc_serving import (
    NOT_SERVING,
    Served,
    eventually,
    health_request,
    raw_client,
    request,
    serving,
)
from tests.support.timing import PATIENCE
from vllm_llm import GenerateStream, MockLlm
from vllm_llm.wire import SERVICE_NAME, FinishReason
from vllm_remote_llm import RemoteLlm
from vllm_remote_llm._readiness import ReadinessWatch

#: How long readiness must stay true while one worker pauses: three times the settle time after which
#: the RemoteLlm's readiness turns false without a serving worker, so a watch left on the paused worker
#: (instead of moving to the one that serves) would show as a False within the window.
FLICKER_WINDOW = 3 * inspect.signature(ReadinessWatch).parameters["settle"].default


@dataclass
class Worker:
    llm: MockLlm
    served: Served

    def got(self, request_id: str) -> bool:
        return any(r.request_id == request_id for r in self.llm.requests)


@pytest_asyncio.fixture
async def workers() -> AsyncIterator[list[Worker]]:
    llms = [MockLlm(step_interval=0.002), MockLlm(step_interval=0.002)]
    async with contextlib.AsyncExitStack() as stack:
        yield [Worker(llm, await stack.enter_async_context(serving(llm))) for llm in llms]
    for llm in llms:
        await llm.shutdown()


@pytest_asyncio.fixture
async def remote(workers: list[Worker]) -> AsyncIterator[RemoteLlm]:
    target = "ipv4:" + ",".join(w.served.target for w in workers)
    llm = await RemoteLlm.connect(target, timeout=5, connect_timeout=10)
    # Both subchannels become ready (connected and health-checked) independently: wait for both.
    n = 0
    while not all(w.llm.requests for w in workers):
        n += 1
        assert n < 200, "a worker never got a request"
        await _run(llm, f"warmup-{n}")
    yield llm
    await llm.shutdown()


async def _run(remote: RemoteLlm, request_id: str) -> list[Any]:
    return [o async for o in await remote.generate(request(request_id, max_tokens=2))]


_probes = itertools.count()


async def _probe(remote: RemoteLlm, workers: list[Worker]) -> Worker:
    """The worker the channel picks for a request (accepted by then); a paused one's request is aborted."""
    request_id = f"probe-{next(_probes)}"
    stream = await remote.generate(request(request_id, max_tokens=2))
    (picked,) = [w for w in workers if w.got(request_id)]
    if picked.llm.subscribe_readiness().value:
        assert [o async for o in stream][-1].finish_reason == FinishReason.LENGTH
    else:
        await stream.aclose()  # a paused worker would never produce it
    return picked


async def _until_only(remote: RemoteLlm, workers: list[Worker], serving: Worker) -> None:
    """Wait until the client's own health check took every other worker out of the rotation.

    With two workers in round_robin's rotation consecutive picks alternate, so two picks in a row of
    `serving` mean the other one is out.
    """
    deadline = time.monotonic() + PATIENCE
    in_a_row = 0
    while in_a_row < 2:
        assert time.monotonic() < deadline, "the channel kept picking a worker that does not serve"
        in_a_row = in_a_row + 1 if await _probe(remote, workers) is serving else 0


async def _until_picked(remote: RemoteLlm, workers: list[Worker], worker: Worker) -> None:
    """Wait until the channel picks `worker` again (its client-side health check saw it serving)."""
    deadline = time.monotonic() + PATIENCE
    while await _probe(remote, workers) is not worker:
        assert time.monotonic() < deadline, "the channel never picked the worker again"


async def test_requests_spread_over_both_workers(workers: list[Worker], remote: RemoteLlm) -> None:
    before = [len(w.llm.requests) for w in workers]
    for i in range(10):
        assert (await _run(remote, f"spread-{i}"))[-1].finish_reason == FinishReason.LENGTH
    spread = [len(w.llm.requests) - b for w, b in zip(workers, before, strict=True)]
    assert sum(spread) == 10
    assert min(spread) >= 4, spread  # round robin alternates


async def test_abort_reaches_the_worker_that_serves_the_request(
    workers: list[Worker], remote: RemoteLlm
) -> None:
    streams: dict[str, GenerateStream] = {}
    i = 0
    while not all(any(w.got(rid) for rid in streams) for w in workers):
        rid = f"long-{i}"
        streams[rid] = await remote.generate(request(rid, max_tokens=100_000))
        i += 1
    target, other = workers
    victim = next(rid for rid in streams if target.got(rid))
    # A foreign request with the same external id on the other worker must survive.
    foreign = await other.llm.generate(request(victim, max_tokens=100_000))
    await remote.abort([victim])
    rest = [o async for o in streams.pop(victim)]
    assert rest[-1].finish_reason == FinishReason.ABORT
    await eventually(lambda: target.llm.aborted == [victim], what="the serving worker aborted it")
    assert other.llm.aborted == []
    assert (await foreign.__anext__()).finish_reason is None
    for stream in [foreign, *streams.values()]:
        await stream.aclose()


async def test_a_stopped_worker_gets_no_more_requests(workers: list[Worker], remote: RemoteLlm) -> None:
    gone, left = workers
    await gone.served.frontend.stop(0)
    before = len(left.llm.requests)
    for i in range(10):
        assert (await _run(remote, f"after-stop-{i}"))[-1].finish_reason == FinishReason.LENGTH
    assert len(left.llm.requests) - before == 10
    assert remote.subscribe_readiness().value is True


async def test_a_worker_that_stops_serving_gets_no_more_requests(
    workers: list[Worker], remote: RemoteLlm
) -> None:
    paused, left = workers
    paused.llm.pause()  # NOT_SERVING; it would still take requests, which would never produce
    async with raw_client(paused.served.target) as (_, health):
        assert (await health.Check(health_request(SERVICE_NAME))).status == NOT_SERVING
    await _until_only(remote, workers, left)
    before = (len(paused.llm.requests), len(left.llm.requests))
    for i in range(10):
        assert (await _run(remote, f"after-pause-{i}"))[-1].finish_reason == FinishReason.LENGTH
    assert (len(paused.llm.requests), len(left.llm.requests)) == (before[0], before[1] + 10)
    paused.llm.resume()


async def test_readiness_is_true_while_any_worker_serves(workers: list[Worker], remote: RemoteLlm) -> None:
    readiness = remote.subscribe_readiness()
    seen: list[bool] = []

    async def record() -> None:
        async for ready in readiness:
            seen.append(ready)

    recorder = asyncio.ensure_future(record())
    first, second = workers
    for worker in (first, second, first):  # whichever worker the watch is on, it moves
        worker.llm.pause()
        await asyncio.sleep(FLICKER_WINDOW)  # the window in which a flicker would show, not a wait
        assert readiness.value is True
        worker.llm.resume()
        await _until_picked(remote, workers, worker)  # serving again before the next one pauses
    assert False not in seen
    first.llm.pause()
    second.llm.pause()
    await asyncio.wait_for(readiness.wait_for(lambda ready: not ready), 5)
    second.llm.resume()
    await asyncio.wait_for(readiness.wait_for(bool), 5)
    first.llm.resume()
    assert remote.subscribe_health().value is True
    recorder.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await recorder
