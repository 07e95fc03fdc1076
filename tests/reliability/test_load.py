"""1,000 concurrent streams through RemoteLlm → worker gRPC → MockLlm, every token checked, memory flat.

The leak check is exact where it can be: no call, stream, request or output object outlives its round,
and the engine and the RemoteLlm hold nothing. RSS is the coarse check: after a warm-up round (grpc
grows its buffers and thread pools once), two more rounds may grow it by at most RSS_TOLERANCE. Twelve
rounds in a row moved RSS within about ±7 MiB of its plateau (the allocator keeps freed arenas), so
16 MiB over 2,000 streams flags a leak of more than 8 KiB a stream; smaller leaks of the request's
own objects are what the exact count catches.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio

from tests.reliability.load import run_round
from tests.reliability.sse import completion, stream_completion
from tests.support.cluster import Cluster, no_engine_work
from tests.support.grpc_serving import Served, serving
from vllm_llm import MockLlm
from vllm_remote_llm import RemoteLlm

STREAMS = 1000
TOKENS = 20
RSS_TOLERANCE = 16 << 20
#: The product promises no throughput, so no limit here measures speed: each only turns a hang (a lost
#: stream waits forever) into a failure, and is set far above what a loaded machine takes (the
#: subprocess's three rounds of 1,000 streams took 24 s at a load average of 17 on two cores).
HANG_GUARD = 300.0
ROOT = Path(__file__).resolve().parents[2]


@pytest_asyncio.fixture
async def remote_over_mock() -> AsyncIterator[tuple[MockLlm, Served, RemoteLlm]]:
    """A MockLlm (10 ms a step) served over gRPC, and a RemoteLlm to it."""
    mock = MockLlm(step_interval=0.01)
    async with serving(mock) as served:
        remote = await RemoteLlm.connect(served.target, timeout=HANG_GUARD, connect_timeout=10)
        yield mock, served, remote
        await remote.shutdown()
    await mock.shutdown()


async def test_a_thousand_concurrent_streams_lose_nothing_and_leak_nothing() -> None:
    """Run in a fresh process (`python -m tests.reliability.load`), so its RSS is this load's alone."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.reliability.load",
        str(STREAMS),
        str(TOKENS),
        "2",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), HANG_GUARD)
    assert proc.returncode == 0, err.decode()[-3000:]  # a lost, duplicated or reordered token fails there
    report = json.loads(out)
    assert report["tokens"] == 2 * STREAMS * TOKENS
    assert report["running"] == 0 and report["calls"] == 0
    assert report["live_after"] == report["live_before"], report
    assert report["rss_grown"] < RSS_TOLERANCE, f"RSS grew by {report['rss_grown'] >> 20} MiB over two rounds"


async def test_a_burst_beyond_grpcs_default_pending_limit_is_served(
    remote_over_mock: tuple[MockLlm, Served, RemoteLlm],
) -> None:
    """1,500 calls at once: more than gRPC's default of 1,000 calls waiting to be picked up."""
    mock, _, remote = remote_over_mock
    done = await asyncio.wait_for(run_round(remote, mock, "burst", streams=1500, tokens=5), HANG_GUARD)
    assert done.tokens == 1500 * 5


async def test_streams_through_the_router_http_match_the_worker(cluster: Cluster) -> None:
    """200 concurrent SSE streams through the router: the same text as the worker gives directly."""
    async with (
        httpx.AsyncClient(base_url=cluster.worker.base_url, timeout=60) as direct,
        httpx.AsyncClient(
            base_url=cluster.router.base_url, timeout=60, limits=httpx.Limits(max_connections=200)
        ) as http,
    ):
        expected = [await stream_completion(direct, completion(i, TOKENS)) for i in range(20)]
        routed = await asyncio.wait_for(
            asyncio.gather(*(stream_completion(http, completion(i % 20, TOKENS)) for i in range(200))),
            HANG_GUARD,
        )
    for i, s in enumerate(routed):
        assert s.status == 200 and not s.errors and s.done
        assert s.text == expected[i % 20].text
    await no_engine_work(cluster.mock)
