"""How a router bounds its re-reads of the workers' adapters (`vllm_server.fresh_read.FreshRead`): every
caller gets a read that started after it asked, concurrent callers share one, one read runs at a time,
and a flood of requests for unknown models through a router costs its worker a few Info calls, not one
per request. (That an adapter loaded on a worker is served through a router process at once is
`test_lora_router_process.py`.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from tests.support.grpc_serving import serving
from tests.support.servers import RunningServer, start_server
from vllm_llm import MockLlm, Unavailable
from vllm_llm.mock import default_info
from vllm_llm.wire import LlmInfo
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.fresh_read import FreshRead
from vllm_server.source import LlmSource


class GatedFetch:
    """A fetch that returns its run's number once the test opens its gate; it counts runs in flight."""

    def __init__(self) -> None:
        self.runs = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.gates: list[asyncio.Event] = []
        self.fail: set[int] = set()
        self._begun: dict[int, asyncio.Event] = {}

    async def __call__(self) -> int:
        self.runs += 1
        number = self.runs
        gate = asyncio.Event()
        self.gates.append(gate)
        self._begin(number).set()
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await gate.wait()
        finally:
            self.in_flight -= 1
        if number in self.fail:
            raise Unavailable(f"run {number} failed")
        return number

    async def started(self, runs: int) -> None:
        """Until run number `runs` has started."""
        await self._begin(runs).wait()

    def _begin(self, number: int) -> asyncio.Event:
        return self._begun.setdefault(number, asyncio.Event())


async def test_callers_that_ask_during_a_read_share_the_next_one_and_never_take_an_older_one() -> None:
    fetch = GatedFetch()
    reads = FreshRead(fetch)
    first = asyncio.create_task(reads.read())
    await fetch.started(1)
    # asked while run 1 runs: run 1 may have been answered before what they want to see
    later = [asyncio.create_task(reads.read()) for _ in range(10)]
    await asyncio.sleep(0)  # one turn of the loop: each of them asks, then waits
    fetch.gates[0].set()
    assert await first == 1
    await fetch.started(2)
    assert fetch.in_flight == 1
    fetch.gates[1].set()
    assert await asyncio.gather(*later) == [2] * 10
    assert (fetch.runs, fetch.most_in_flight) == (2, 1)
    # a caller after both: a run of its own
    third = asyncio.create_task(reads.read())
    await fetch.started(3)
    fetch.gates[2].set()
    assert await third == 3


async def test_a_failed_read_fails_each_caller_that_waited_for_it_once() -> None:
    fetch = GatedFetch()
    fetch.fail.add(2)
    reads = FreshRead(fetch)
    first = asyncio.create_task(reads.read())
    await fetch.started(1)
    waiting = [asyncio.create_task(reads.read()) for _ in range(5)]
    await asyncio.sleep(0)  # one turn of the loop: each of them asks, then waits for the next run
    fetch.gates[0].set()
    assert await first == 1
    await fetch.started(2)
    fetch.gates[1].set()
    for outcome in await asyncio.gather(*waiting, return_exceptions=True):
        assert isinstance(outcome, Unavailable) and outcome.message == "run 2 failed"
    assert fetch.runs == 2  # the failure answered all five: none of them ran a read of its own
    after = asyncio.create_task(reads.read())
    await fetch.started(3)
    fetch.gates[2].set()
    assert await after == 3


async def test_a_caller_that_goes_away_does_not_cancel_the_read_others_wait_for() -> None:
    fetch = GatedFetch()
    reads = FreshRead(fetch)
    starter = asyncio.create_task(reads.read())
    await fetch.started(1)
    starter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await starter
    assert fetch.in_flight == 1  # the run goes on
    fetch.gates[0].set()
    after = asyncio.create_task(reads.read())
    await fetch.started(2)
    fetch.gates[1].set()
    assert await after == 2 and fetch.runs == 2


class CountedInfo:
    """A worker's Info answer that counts how often it was asked."""

    def __init__(self, info: LlmInfo) -> None:
        self.info = info
        self.calls = 0

    def __call__(self) -> LlmInfo:
        self.calls += 1
        return self.info


@pytest_asyncio.fixture(loop_scope="session")
async def counted_router() -> AsyncIterator[tuple[RunningServer, CountedInfo]]:
    """A router (the server over a RemoteLlm) over a served MockLlm whose Info calls are counted."""
    llm = MockLlm(info=default_info())
    info = CountedInfo(llm.info())
    async with serving(llm, info=info) as served:
        remote = await RemoteLlm.connect(served.target)
        router = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(remote))
        try:
            yield router, info
        finally:
            await router.stop()
            await remote.shutdown()


@pytest.mark.asyncio(loop_scope="session")
async def test_a_flood_of_requests_for_unknown_models_costs_the_worker_a_few_reads(
    counted_router: tuple[RunningServer, CountedInfo],
) -> None:
    router, info = counted_router
    flood = 200
    async with httpx.AsyncClient(base_url=router.base_url, timeout=60) as http:
        before = info.calls
        answers = await asyncio.gather(
            *(
                http.post("/v1/completions", json={"model": f"unknown-{i}", "prompt": "hi", "max_tokens": 1})
                for i in range(flood)
            )
        )
    assert {a.status_code for a in answers} == {404}
    reads = info.calls - before
    print(f"{flood} requests for unknown models: {reads} Info calls")
    assert 1 <= reads <= flood // 10
