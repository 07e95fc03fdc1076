"""A router frontend process runs without vLLM, torch or the benchmark harness loaded.

`vllm-frontend serve --remote` is started through a wrapper that, on request (a line on its stdin),
prints the router's own `sys.modules` from a thread of that process: the listing is taken after the
router became ready and served a completion through its worker.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

#: Top-level packages a router must not load: only an engine-core worker needs vLLM and torch, and the
#: benchmark harness is never imported by the runtime.
ENGINE_OR_TOOLING = {"vllm", "torch", "vllm_frontend_bench"}

#: Runs the CLI in this process; a thread prints `sys.modules` (as JSON, one line) per line read on stdin.
WRAPPER = """
import json, sys, threading
from vllm_server.cli import main

def answer() -> None:
    for _ in sys.stdin:
        print(json.dumps(sorted(sys.modules.copy())), flush=True)  # copy: atomic under the GIL

threading.Thread(target=answer, daemon=True).start()
sys.exit(main(sys.argv[1:]))
"""


@pytest_asyncio.fixture
async def worker(tiny_model_dir: Path) -> AsyncIterator[RunningServer]:
    """A worker over a MockLlm with the tiny model's info, in this process."""
    llm = tiny_mock(tiny_model_dir)
    running = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(llm))
    yield running
    await running.stop()
    await llm.shutdown()


class _Router:
    """The router process: its ports (from its log), its log, and its module listing."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.log: list[str] = []
        self.ports = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_log())

    async def _read_log(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.log.append(line)
            m = re.search(r"listening: HTTP on [\d.]+:(\d+), gRPC on (\d+)", line)
            if m and not self.ports.done():
                self.ports.set_result((int(m.group(1)), int(m.group(2))))

    async def listening(self) -> tuple[int, int]:
        done, _ = await asyncio.wait(
            [self.ports, self._reader], timeout=120, return_when=asyncio.FIRST_COMPLETED
        )
        assert self.ports in done, "\n".join(self.log)
        ports: tuple[int, int] = self.ports.result()
        return ports

    async def modules(self) -> list[str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(b"modules\n")
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), 30)
        names: list[str] = json.loads(line)
        return names

    async def stop(self) -> int:
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(self.proc.wait(), 60)
        await self._reader
        return code


async def _serving(target: str) -> None:
    """Wait (event-driven, through gRPC health's Watch) until the router serves."""
    async with grpc.aio.insecure_channel(target) as channel:
        statuses = health_pb2_grpc.HealthStub(channel).Watch(health_pb2.HealthCheckRequest(service=""))
        async for response in statuses:
            if response.status == health_pb2.HealthCheckResponse.SERVING:
                statuses.cancel()
                return


@pytest.mark.parametrize("mux", [False, True], ids=["calls", "remote-mux"])
async def test_router_loads_neither_vllm_nor_torch_nor_the_bench(
    worker: RunningServer, mux: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="vllm_server.grpc.llm_service")
    # no access log: the router's stdout carries the module listing
    argv = [
        "serve",
        "--remote",
        worker.grpc_target,
        "--port",
        "0",
        "--grpc-port",
        "0",
        "--disable-uvicorn-access-log",
        *(["--remote-mux"] if mux else []),
    ]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WRAPPER,
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    router = _Router(proc)
    try:
        http_port, grpc_port = await router.listening()
        await asyncio.wait_for(_serving(f"127.0.0.1:{grpc_port}"), 60)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{http_port}", timeout=60) as http:
            assert (await http.get("/ready")).status_code == 200
            body = {"model": "tiny", "prompt": "hello there", "max_tokens": 4, "ignore_eos": True}
            completion = await http.post("/v1/completions", json=body)
            assert completion.status_code == 200, completion.text
            assert completion.json()["usage"]["completion_tokens"] == 4
        modules = await router.modules()
    finally:
        code = await router.stop()
    # the listing is the router's: it runs the server over a RemoteLlm
    assert {"vllm_server.cli", "vllm_server.http.app", "vllm_remote_llm.remote"} <= set(modules)
    loaded = sorted(m for m in modules if m.split(".")[0] in ENGINE_OR_TOOLING)
    assert not loaded, f"{len(loaded)} modules loaded, among them {loaded[:12]}"
    assert code == 0, "\n".join(router.log)
    # --remote-mux: the worker served the completion on a GenerateMux stream (it logs each one)
    streams = [r.getMessage() for r in caplog.records if "GenerateMux stream" in r.getMessage()]
    assert bool(streams) is mux, streams
