"""Cancelling a GenerateStream (or dropping the connection) aborts the request, also through a router."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio

from tests.support.mock import tiny_mock
from tests.support.public_grpc import public_client
from tests.support.servers import RunningServer, start_server
from tests.support.timing import PATIENCE
from vllm_llm import MockLlm
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.grpc.proto import inference_pb2 as pb
from vllm_server.source import LlmSource

#: The mock's step: LONG runs 400 steps, 20 s, so a request ended sooner was ended by its abort, however
#: long the abort took to arrive on a loaded machine (the mock lists a request in `aborted` only then).
STEP = 0.05
LONG = pb.GenerateRequest(
    text="Once upon a time",
    temperature=0.0,
    stopping=pb.StoppingCriteria(max_new_tokens=400, ignore_eos=True),
)


@pytest_asyncio.fixture(loop_scope="session")
async def mock_worker(tiny_model_dir: Path) -> AsyncIterator[tuple[RunningServer, MockLlm]]:
    """A server over a provided MockLlm."""
    mock = tiny_mock(tiny_model_dir, step_interval=STEP)
    server = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock))
    yield server, mock
    await server.stop()
    await mock.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def mock_router(mock_worker: tuple[RunningServer, MockLlm]) -> AsyncIterator[RunningServer]:
    """A router (a server over a RemoteLlm) in front of `mock_worker`."""
    worker, _ = mock_worker
    remote = await RemoteLlm.connect(worker.grpc_target)
    router = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(remote))
    yield router
    await router.stop()
    await remote.shutdown()


async def _cancel_after_first_output(target: str, mock: MockLlm) -> None:
    running = mock.subscribe_running()
    async with public_client(target) as client:
        call = client.inference.GenerateStream(LONG, timeout=PATIENCE)
        first = await call.read()
        assert first.HasField("prompt_info")
        assert (await call.read()).outputs.num_tokens > 0
        assert mock.num_running == 1
        call.cancel()
    assert await asyncio.wait_for(running.wait_for(lambda n: n == 0), PATIENCE) == 0
    assert len(mock.aborted) == 1


async def test_cancelling_a_stream_aborts_the_request(mock_worker: tuple[RunningServer, MockLlm]) -> None:
    server, mock = mock_worker
    await _cancel_after_first_output(server.grpc_target, mock)


async def test_cancelling_through_a_router_aborts_on_the_worker(
    mock_worker: tuple[RunningServer, MockLlm], mock_router: RunningServer
) -> None:
    _, mock = mock_worker
    await _cancel_after_first_output(mock_router.grpc_target, mock)


async def test_a_deadline_aborts_the_request(mock_worker: tuple[RunningServer, MockLlm]) -> None:
    server, mock = mock_worker
    running = mock.subscribe_running()
    async with public_client(server.grpc_target) as client:
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await client.stream(LONG, deadline=0.3)
        assert exc.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert await asyncio.wait_for(running.wait_for(lambda n: n == 0), PATIENCE) == 0
    assert mock.aborted
