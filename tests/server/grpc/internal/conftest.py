"""Fixtures of the gRPC frontend tests: a MockLlm served on loopback and plain stubs to call it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from tests.support.grpc_serving import Served, raw_client, serving
from vllm_llm import MockLlm
from vllm_remote_llm import LlmStub


@pytest_asyncio.fixture
async def mock() -> AsyncIterator[MockLlm]:
    """A MockLlm stepping every millisecond."""
    llm = MockLlm(step_interval=0.001)
    yield llm
    await llm.shutdown()


@pytest_asyncio.fixture
async def served(mock: MockLlm) -> AsyncIterator[Served]:
    """`mock` behind a GrpcFrontend."""
    async with serving(mock) as s:
        yield s


@pytest_asyncio.fixture
async def stubs(served: Served) -> AsyncIterator[tuple[LlmStub, Any]]:
    """The Llm and health stubs of a plain channel to `served`."""
    async with raw_client(served.target) as pair:
        yield pair
