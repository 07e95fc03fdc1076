"""Prefix affinity over two real workers: with `prefix` routing every request of a shared prefix lands on
one worker, and the workers' prefix caches hit more often than under round robin in the same run (both
ratios printed). Read from each worker's `/metrics`, vLLM's `vllm:prefix_cache_queries` / `_hits`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.support.engine import tiny_engine_settings
from tests.support.grpc_serving import request
from tests.support.servers import RunningServer, start_server
from vllm_remote_llm import RemoteLlm, Routing
from vllm_server.config import EngineCoreConfig, ServerConfig
from vllm_server.source import LlmSource

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: Odd, so that round robin over two workers sends each prefix to both in turn.
PREFIXES = 5
ROUNDS = 4


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def second_worker(tiny_model_dir: Path, worker: RunningServer) -> AsyncIterator[RunningServer]:
    """A second real worker beside the session's (started after it: two engines starting at once starve)."""
    engine = EngineCoreConfig(
        settings=tiny_engine_settings(tiny_model_dir, enable_lora=False, enable_prompt_embeds=False)
    )
    running = await start_server(
        ServerConfig(port=0, grpc_port=0, shutdown_grace_period=5), LlmSource.engine_core(engine)
    )
    yield running
    await running.stop()


def _engine_queries(server: RunningServer) -> int:
    engine = server.state.engine
    assert engine is not None
    return engine.prefix_cache_totals()[0]


async def _prefix_cache(server: RunningServer) -> tuple[float, float]:
    async with httpx.AsyncClient(base_url=server.base_url) as http:
        text = (await http.get("/metrics")).text

    def total(name: str) -> float:
        return sum(float(v) for v in re.findall(rf"^{name}_total\{{[^}}]*\}} (\S+)$", text, re.M))

    return total("vllm:prefix_cache_queries"), total("vllm:prefix_cache_hits")


async def test_prefix_routing_lands_each_prefix_on_one_worker_and_hits_the_cache_more(
    worker: RunningServer, second_worker: RunningServer
) -> None:
    servers = (worker, second_worker)
    target = "ipv4:" + ",".join(s.grpc_target for s in servers)
    ratios: dict[str, float] = {}
    for base, routing in ((1000, "prefix"), (600, "round_robin")):
        policy: Routing = "prefix" if routing == "prefix" else "round_robin"
        remote = await RemoteLlm.connect(target, routing=policy, prefix_blocks=1)
        block = remote.info().block_size or 16
        before = [await _prefix_cache(s) for s in servers]
        landed: dict[int, set[int]] = {p: set() for p in range(PREFIXES)}
        try:
            for rnd in range(ROUNDS):
                for p in range(PREFIXES):
                    prompt = [base + p] * (2 * block) + [base + 50 + rnd]
                    looked_up = [_engine_queries(s) for s in servers]
                    async for _ in await remote.generate(
                        request(f"affinity-{routing}-{p}-{rnd}", prompt=prompt, max_tokens=1)
                    ):
                        pass
                    # the worker that served it is the one whose engine looked the prompt up
                    landed[p] |= {i for i, s in enumerate(servers) if _engine_queries(s) > looked_up[i]}
        finally:
            await remote.shutdown()
        print(routing, "workers per prefix:", {p: sorted(w) for p, w in landed.items()})
        if routing == "prefix":
            assert all(len(w) == 1 for w in landed.values())
        else:
            assert all(w == {0, 1} for w in landed.values())
        after = [await _prefix_cache(s) for s in servers]
        queries = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
        hits = sum(a[1] - b[1] for a, b in zip(after, before, strict=True))
        ratios[routing] = hits / queries
        print(
            f"{routing}: prefix-cache hits {hits:.0f} of {queries:.0f} queried tokens ({hits / queries:.2f})"
        )
    assert ratios["prefix"] > ratios["round_robin"]
