"""Fixtures of the Llm contract suite: one `Harness` per implementation (adding one is one fixture)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.llm.harness import Harness
from vllm_llm import MockLlm

IMPLEMENTATIONS = ["mock"]


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


@pytest.fixture(params=IMPLEMENTATIONS)
def harness(request: pytest.FixtureRequest) -> Harness:
    """Each implementation of the contract suite in turn."""
    h: Harness = request.getfixturevalue(f"{request.param}_harness")
    return h
