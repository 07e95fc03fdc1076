"""Two worker processes behind one router process, balanced by gRPC's own round-robin with health checks."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest_asyncio
from openai import AsyncOpenAI

EXE = str(Path(sys.executable).with_name("vllm-frontend"))


@dataclass
class Frontend:
    """A `vllm-frontend serve` process and the ports it reports."""

    proc: asyncio.subprocess.Process
    http_port: int = 0
    grpc_port: int | None = None
    log: list[str] = field(default_factory=list)
    reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, *args: str) -> Frontend:
        """Start `vllm-frontend serve ARGS...` on ephemeral ports and wait until it listens."""
        proc = await asyncio.create_subprocess_exec(
            EXE, "serve", "--port", "0", *args, stderr=asyncio.subprocess.PIPE
        )
        front = cls(proc)
        assert proc.stderr is not None
        while True:
            raw = await asyncio.wait_for(proc.stderr.readline(), 120)
            if not raw:
                raise RuntimeError("\n".join(front.log))
            line = raw.decode(errors="replace").rstrip()
            front.log.append(line)
            m = re.search(r"listening: HTTP on [\d.]+:(\d+), gRPC on (\w+)", line)
            if m:
                front.http_port = int(m.group(1))
                front.grpc_port = int(m.group(2)) if m.group(2).isdigit() else None
                break
        front.reader = asyncio.create_task(front._read_rest())
        return front

    async def _read_rest(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.log.append(raw.decode(errors="replace").rstrip())

    async def stop(self) -> None:
        """SIGTERM, then wait."""
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(self.proc.wait(), 60)
        if self.reader is not None:
            await self.reader

    async def kill(self) -> None:
        """SIGKILL, then wait."""
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()
        if self.reader is not None:
            await self.reader


@pytest_asyncio.fixture
async def cluster(tiny_model_dir: Path) -> AsyncIterator[tuple[Frontend, list[Frontend]]]:
    """Two `--mock` workers and a `--remote ipv4:...` router."""
    workers = [
        await Frontend.start("--mock", "--grpc-port", "0", "--served-model-name", "tiny") for _ in range(2)
    ]
    target = "ipv4:" + ",".join(f"127.0.0.1:{w.grpc_port}" for w in workers)
    tokenizer = str(tiny_model_dir)
    router = await Frontend.start(
        "--remote", target, "--grpc-port", "-1", "--tokenizer", tokenizer, "--served-model-name", "tiny"
    )
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


async def test_router_survives_a_worker_kill(cluster: tuple[Frontend, list[Frontend]]) -> None:
    router, workers = cluster
    base = f"http://127.0.0.1:{router.http_port}"
    client = AsyncOpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
    first = await asyncio.gather(*[_chat(client, i) for i in range(40)])
    assert len(first) == 40
    await workers[0].kill()
    async with httpx.AsyncClient(base_url=base) as http:
        assert (await http.get("/health")).status_code == 200
    second = await asyncio.gather(*[_chat(client, i) for i in range(20)])
    assert second == first[:20]  # deterministic mock: same prompt, same text, whichever worker served it
    n2 = await client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "two"}], max_tokens=4, n=2, temperature=0.5
    )
    assert len(n2.choices) == 2
    await client.close()
