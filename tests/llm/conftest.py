"""Fixtures of the Llm contract suite: one `Harness` per implementation (adding one is one fixture)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.llm.harness import Harness
from vllm_llm import MockLlm
from vllm_llm.engine_core import EngineCoreLlm
from vllm_llm.wire import GenerateRequest, SamplingParams

IMPLEMENTATIONS = ["mock", "engine_core", "remote_mock", "remote_engine", "disaggregated_mock"]


@pytest_asyncio.fixture
async def mock_harness() -> AsyncIterator[Harness]:
    """A fresh MockLlm, stepping flat out."""
    llm = MockLlm(step_interval=0.001)

    async def pause() -> None:
        llm.pause()

    async def resume() -> None:
        llm.resume()

    async def in_flight() -> int:
        return llm.num_running

    yield Harness("mock", llm, pause, resume, in_flight)
    await llm.shutdown()


@pytest_asyncio.fixture
async def disaggregated_mock_harness() -> AsyncIterator[Harness]:
    """A DisaggregatedLlm over a prefill MockLlm and a decode MockLlm."""
    from vllm_llm.disaggregated import DisaggregatedLlm

    prefill, decode = MockLlm(step_interval=0.001), MockLlm(step_interval=0.001)
    llm = DisaggregatedLlm(prefill, decode)

    async def pause() -> None:
        prefill.pause()
        decode.pause()

    async def resume() -> None:
        prefill.resume()
        decode.resume()

    async def in_flight() -> int:
        return prefill.num_running + decode.num_running

    yield Harness("disaggregated_mock", llm, pause, resume, in_flight)
    await llm.shutdown()


async def engine_requests(llm: EngineCoreLlm) -> int:
    """Requests the engine itself still holds: run a one-token probe and read the scheduler's stats."""
    probe = GenerateRequest(
        request_id="state-probe", prompt_token_ids=[1, 2, 3], sampling_params=SamplingParams(max_tokens=1)
    )
    async for _ in await llm.generate(probe):
        pass
    stats = llm.scheduler_stats
    assert stats, "the engine reports no scheduler stats (log_stats off?)"
    return sum(s.num_running_reqs + s.num_waiting_reqs for s in stats.values())


@pytest_asyncio.fixture
async def engine_core_harness(engine_llm: EngineCoreLlm) -> AsyncIterator[Harness]:
    """The session's EngineCoreLlm over the tiny model."""

    async def pause() -> None:
        await engine_llm.pause(mode="keep")

    async def resume() -> None:
        await engine_llm.resume()

    async def in_flight() -> int:
        return engine_llm.num_in_flight + await engine_requests(engine_llm)

    yield Harness(
        "engine_core", engine_llm, pause, resume, in_flight, prompt=[1, 286, 669, 596, 267, 653, 650]
    )
    assert engine_llm.num_in_flight == 0


@pytest.fixture(params=IMPLEMENTATIONS)
def harness(request: pytest.FixtureRequest) -> Harness:
    """Each implementation of the contract suite in turn."""
    h: Harness = request.getfixturevalue(f"{request.param}_harness")
    return h


# ---- RemoteLlm over a GrpcFrontend (loopback) ------------------------------------------------------
# Closing a remote stream cancels its call; the server aborts when the cancellation arrives, a moment
# later, so `in_flight` waits (briefly) for the server's count to settle.


@pytest_asyncio.fixture
async def remote_mock_harness() -> AsyncIterator[Harness]:
    """RemoteLlm -> GrpcFrontend -> a fresh MockLlm."""
    from tests.support.grpc_serving import serving, settled_count
    from vllm_remote_llm import RemoteLlm

    llm = MockLlm(step_interval=0.001)

    async def pause() -> None:
        llm.pause()

    async def resume() -> None:
        llm.resume()

    async def in_flight() -> int:
        return await settled_count(lambda: llm.num_running)

    async with serving(llm) as served:
        remote = await RemoteLlm.connect(served.target, connect_timeout=10)
        yield Harness("remote_mock", remote, pause, resume, in_flight)
        await remote.shutdown()
    await llm.shutdown()


@pytest_asyncio.fixture
async def remote_engine_harness(engine_llm: EngineCoreLlm) -> AsyncIterator[Harness]:
    """RemoteLlm -> GrpcFrontend -> the session's EngineCoreLlm."""
    from tests.support.grpc_serving import serving, settled_count
    from vllm_remote_llm import RemoteLlm

    async def pause() -> None:
        await engine_llm.pause(mode="keep")

    async def resume() -> None:
        await engine_llm.resume()

    async def in_flight() -> int:
        return await settled_count(lambda: engine_llm.num_in_flight) + await engine_requests(engine_llm)

    async with serving(engine_llm) as served:
        remote = await RemoteLlm.connect(served.target, connect_timeout=30)
        yield Harness(
            "remote_engine", remote, pause, resume, in_flight, prompt=[1, 286, 669, 596, 267, 653, 650]
        )
        await remote.shutdown()
    assert await settled_count(lambda: engine_llm.num_in_flight) == 0
