"""Fixtures of the reliability tests: a `Cluster` per test or per module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from tests.support.cluster import Cluster, open_cluster


@pytest_asyncio.fixture
async def cluster(tiny_model_dir: Path) -> AsyncIterator[Cluster]:
    """A cluster of this test's own."""
    async with open_cluster(tiny_model_dir) as c:
        yield c


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def shared_cluster(tiny_model_dir: Path) -> AsyncIterator[Cluster]:
    """A cluster shared by a module whose tests leave it as they found it."""
    async with open_cluster(tiny_model_dir) as c:
        yield c
