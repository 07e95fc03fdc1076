"""Fixtures of the server tests: the app over a fresh `MockLlm` per test (fast, deterministic) and over
the session's `engine_llm` (greedy-deterministic), served by `tests.support.http_serving`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import pytest_asyncio

from tests.support.http_serving import Served, serve, server_state
from vllm_llm import MockLlm
from vllm_llm.wire import LlmInfo

if TYPE_CHECKING:
    from vllm_llm import EngineCoreLlm


@pytest_asyncio.fixture
async def mock_llm(tiny_info: LlmInfo) -> AsyncIterator[MockLlm]:
    """A fresh MockLlm reporting the tiny model's info."""
    llm = MockLlm(info=tiny_info)
    yield llm
    await llm.shutdown()


@pytest_asyncio.fixture
async def mock_server(mock_llm: MockLlm) -> AsyncIterator[Served]:
    """The app over the MockLlm."""
    async with serve(server_state(mock_llm)) as served:
        yield served


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def engine_server(engine_llm: EngineCoreLlm) -> AsyncIterator[Served]:
    """The app over the session's engine (shared by a test module)."""
    async with serve(server_state(engine_llm)) as served:
        yield served
