"""Fixtures shared by the RemoteLlm tests: a MockLlm and a GrpcFrontend serving it on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.grpc_serving import Served, serving
from vllm_llm import MockLlm


@pytest_asyncio.fixture
async def mock() -> AsyncIterator[MockLlm]:
    """A MockLlm stepping every 2 ms."""
    llm = MockLlm(step_interval=0.002)
    yield llm
    await llm.shutdown()


@pytest_asyncio.fixture
async def served(mock: MockLlm) -> AsyncIterator[Served]:
    """`mock` behind a GrpcFrontend."""
    async with serving(mock) as s:
        yield s


@pytest.fixture(params=[False, True], ids=["calls", "mux"])
def mux(request: pytest.FixtureRequest) -> bool:
    """Whether the RemoteLlm under test sends its requests on one GenerateMux stream (else a call each)."""
    return bool(request.param)
