"""Two worker processes behind one router process, balanced by gRPC's own round-robin with health checks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path

import httpx
import pytest_asyncio
from openai import AsyncOpenAI

from vllm_frontend_testing.processes import Frontend, mock_worker, router_over


@pytest_asyncio.fixture
async def cluster(tiny_model_dir: Path) -> AsyncIterator[tuple[Frontend, list[Frontend]]]:
    """Two `--mock` workers and a `--remote ipv4:...` router."""
    workers = [await mock_worker() for _ in range(2)]
    router = await router_over(workers, tiny_model_dir)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{router.http_port}") as http:
        assert (await http.get("/ready")).status_code == 200  # it listens once its workers serve
    yield router, workers
    for front in (router, *workers):
        await front.stop()


async def _chat(client: AsyncOpenAI, i: int) -> str:
    chat = await client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": f"hello {i}"}], max_tokens=12, temperature=0
    )
    assert chat.choices[0].finish_reason == "length"
    return chat.choices[0].message.content or ""


LONG = {"model": "tiny", "prompt": "hello", "max_tokens": 480, "ignore_eos": True, "stream": True}


async def _open_streams(stack: AsyncExitStack, http: httpx.AsyncClient, n: int) -> list[AsyncIterator[str]]:
    """`n` long streamed completions, each past its first chunk (so each is running on a worker)."""
    streams = []
    for _ in range(n):
        response = await stack.enter_async_context(http.stream("POST", "/v1/completions", json=LONG))
        assert response.status_code == 200
        lines = response.aiter_lines()
        while not (await anext(lines)).startswith("data: "):
            pass
        streams.append(lines)
    return streams


async def _outcome(lines: AsyncIterator[str]) -> str:
    """`finished` if the stream ran to its length, `failed` if it ended with an error event."""
    events = [json.loads(line[6:]) async for line in lines if line.startswith("data: {")]
    if any(c["choices"] and c["choices"][0]["finish_reason"] == "length" for c in events if "choices" in c):
        return "finished"
    assert "error" in events[-1], events[-1]
    return "failed"


async def test_requests_are_balanced_and_survive_a_worker_kill(
    cluster: tuple[Frontend, list[Frontend]],
) -> None:
    router, workers = cluster
    base = f"http://127.0.0.1:{router.http_port}"
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    first = await asyncio.gather(*[_chat(client, i) for i in range(20)])
    # 40 requests in flight, then one worker is killed: the requests it served fail, the others finish.
    # Each side's share is the balancing (round robin gives 20 each; one worker alone would give 0/40).
    async with AsyncExitStack() as stack, httpx.AsyncClient(base_url=base, timeout=120) as http:
        streams = await _open_streams(stack, http, 40)
        await workers[0].kill()
        outcomes = await asyncio.gather(*[_outcome(s) for s in streams])
    finished = outcomes.count("finished")
    assert 10 <= finished <= 30, outcomes
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/health")).status_code == 200
    second = await asyncio.gather(*[_chat(client, i) for i in range(20)])
    assert second == first  # deterministic mock: same prompt, same text, whichever worker served it
    n2 = await client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "two"}], max_tokens=4, n=2, temperature=0.5
    )
    assert len(n2.choices) == 2
    await client.close()
