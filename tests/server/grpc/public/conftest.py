"""Fixtures of the public gRPC API tests: clients of the session worker, and of routers in front of it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
import pytest_asyncio

from tests.support.public_grpc import PublicClient, public_client
from tests.support.servers import RunningServer, start_server
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


@pytest_asyncio.fixture(loop_scope="session")
async def worker_client(worker: RunningServer) -> AsyncIterator[PublicClient]:
    """The public API of the session worker (the server over the session's engine core)."""
    async with public_client(worker.grpc_target) as client:
        yield client


@pytest_asyncio.fixture(loop_scope="session")
async def worker_http(worker: RunningServer) -> AsyncIterator[httpx.AsyncClient]:
    """HTTP to the session worker."""
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        yield http


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def engine_router(worker: RunningServer) -> AsyncIterator[RunningServer]:
    """A router: a server over a RemoteLlm to the session worker (a provided Llm: no Control)."""
    remote = await RemoteLlm.connect(worker.grpc_target)
    router = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(remote))
    yield router
    await router.stop()
    await remote.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def router_client(engine_router: RunningServer) -> AsyncIterator[PublicClient]:
    """The public API of the router in front of the session worker."""
    async with public_client(engine_router.grpc_target) as client:
        yield client


@pytest.fixture(params=["worker", "router"])
def client(
    request: pytest.FixtureRequest, worker_client: PublicClient, router_client: PublicClient
) -> PublicClient:
    """The public API of the worker, or of the router in front of it (tests run against both)."""
    return worker_client if request.param == "worker" else router_client
