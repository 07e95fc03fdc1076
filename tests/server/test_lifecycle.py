"""gRPC health through a server's life: boot, pause, SIGTERM drain (a real `vllm-frontend` process)."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.grpc_serving import raw_client
from tests.support.grpc_serving import request as grpc_request
from tests.support.mock import tiny_mock
from tests.support.servers import start_server
from vllm_llm.wire import SERVICE_NAME
from vllm_server.cli import parse_serve_args, serve_config
from vllm_server.config import ServerConfig
from vllm_server.runtime import SERVING_GEN0_THRESHOLD, freeze_heap, loop_factory
from vllm_server.source import LlmSource

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _statuses(target: str, service: str) -> AsyncIterator[int]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        async for response in stub.Watch(health_pb2.HealthCheckRequest(service=service)):
            yield response.status


async def _next_status(statuses: AsyncIterator[int]) -> int:
    return await asyncio.wait_for(anext(statuses), 30)


async def test_health_watch_sees_boot_and_pause(tiny_model_dir: Path) -> None:
    llm = tiny_mock(tiny_model_dir)
    llm.pause()  # the Llm is not ready when the server boots
    running = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(llm), ready=False)
    try:
        for service in ("", SERVICE_NAME):
            statuses = _statuses(running.grpc_target, service)
            assert await _next_status(statuses) == NOT_SERVING
            llm.resume()
            assert await _next_status(statuses) == SERVING
            llm.pause()
            assert await _next_status(statuses) == NOT_SERVING
            await statuses.aclose()  # type: ignore[attr-defined]
    finally:
        llm.resume()
        await running.stop()
        await llm.shutdown()


class _Frontend:
    """A `vllm-frontend serve --mock` process and its ports."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.http_port = 0
        self.grpc_port = 0
        self.log: list[str] = []
        self._listening = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.log.append(line)
            m = re.search(r"listening: HTTP on [\d.]+:(\d+), gRPC on (\d+)", line)
            if m:
                self.http_port, self.grpc_port = int(m.group(1)), int(m.group(2))
                self._listening.set()

    async def listening(self) -> None:
        waiter = asyncio.ensure_future(self._listening.wait())
        done, _ = await asyncio.wait([waiter, self._reader], timeout=60, return_when=asyncio.FIRST_COMPLETED)
        assert waiter in done, "\n".join(self.log)

    async def wait(self) -> int:
        code = await asyncio.wait_for(self.proc.wait(), 60)
        await self._reader
        return code


async def test_sigterm_drains_an_in_flight_stream_then_exits_0(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("vllm-frontend")
    proc = await asyncio.create_subprocess_exec(
        str(exe),
        "serve",
        "--mock",
        "--port",
        "0",
        "--grpc-port",
        "0",
        "--served-model-name",
        "tiny",
        "--shutdown-grace-period",
        "60",
        stderr=asyncio.subprocess.PIPE,
    )
    frontend = _Frontend(proc)
    await frontend.listening()
    base = f"http://127.0.0.1:{frontend.http_port}"
    statuses = _statuses(f"127.0.0.1:{frontend.grpc_port}", SERVICE_NAME)
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        assert (await http.get("/ready")).status_code == 200  # a ready provided Llm: ready once listening
        assert await _next_status(statuses) == SERVING
        body = {
            "model": "tiny",
            "prompt": "hello there",
            "max_tokens": 150,
            "ignore_eos": True,
            "stream": True,
        }
        async with http.stream("POST", "/v1/completions", json=body) as stream:
            assert stream.status_code == 200
            lines = stream.aiter_lines()
            first = await anext(lines)
            assert first.startswith("data: ")
            proc.send_signal(signal.SIGTERM)
            assert await _next_status(statuses) == NOT_SERVING
            refused = await http.post(
                "/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2}
            )
            assert refused.status_code == 503
            assert (await http.get("/ready")).status_code == 503
            rest = [line async for line in lines if line.startswith("data: ")]
    await statuses.aclose()  # type: ignore[attr-defined]
    assert rest[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in [first, *rest[:-1]]]
    finish = [
        c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]
    ]
    assert finish == ["length"]
    assert await frontend.wait() == 0
    log = "\n".join(frontend.log)
    # `--event-loop auto` (the default) serves on uvloop, installed with the server
    assert "event loop: uvloop.Loop" in log, log
    # the CLI owns its process: once the Llm was ready, the start-up heap was frozen
    frozen = re.search(r"froze the start-up heap: (\d+) objects", log)
    assert frozen is not None and int(frozen.group(1)) > 10_000, log
    # and it looked for CPUs an engine bound (a mock has none: nothing to keep off)
    assert "frontend CPUs left alone: the engine bound no CPUs of its own" in log, log


def test_freeze_heap_freezes_what_is_alive_and_spaces_young_collections() -> None:
    import gc

    alive = [[i] for i in range(1000)]  # tracked containers, alive across the freeze

    def scanned() -> set[int]:  # what the collector's generations hold (the frozen are elsewhere)
        return {id(o) for o in gc.get_objects()}

    assert id(alive[0]) in scanned()
    threshold = gc.get_threshold()
    try:
        frozen = freeze_heap()
        # young collections no longer run every few hundred per-token allocations
        assert gc.get_threshold() == (SERVING_GEN0_THRESHOLD, *threshold[1:])
        # frozen objects that die later leave the count (another thread may free some at any time)
        assert frozen >= gc.get_freeze_count() >= len(alive)
        assert not {id(x) for x in alive} & scanned()
    finally:
        gc.unfreeze()  # this test process is pytest's, not a server's
        gc.set_threshold(*threshold)
    assert gc.get_freeze_count() == 0
    assert id(alive[0]) in scanned()


def test_only_the_cli_freezes_the_heap() -> None:
    # process-wide, so an embedded Server leaves it to its host; `vllm-frontend serve` owns its process
    assert ServerConfig().freeze_gc_heap is False
    assert serve_config(["--mock"]).server.freeze_gc_heap is True
    assert parse_serve_args(["--mock"]).event_loop == "auto"


def test_event_loop_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    assert loop_factory("auto") is uvloop.new_event_loop
    assert loop_factory("uvloop") is uvloop.new_event_loop
    assert loop_factory("asyncio") is None
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if not installed: the import fails
    assert loop_factory("auto") is None
    with pytest.raises(SystemExit, match="uvloop is not installed"):
        loop_factory("uvloop")
    with pytest.raises(ValueError, match="unknown event loop"):
        loop_factory("trio")


async def test_a_grpc_call_during_the_whole_drain_is_refused_unavailable_by_the_server() -> None:
    """While a drain waits for a long Generate, every new Generate is answered UNAVAILABLE by the
    server's own refusal ("draining"), the status a balancing client takes as "go elsewhere". gRPC's
    server is stopped only once the calls in flight ended: stopped at once (as it was), a call arriving
    during the grace met gRPC's own shutdown instead (CANCELLED, or a transport error)."""
    exe = Path(sys.executable).with_name("vllm-frontend")
    argv = ["serve", "--mock", "--port", "0", "--grpc-port", "0", "--served-model-name", "tiny"]
    proc = await asyncio.create_subprocess_exec(
        str(exe), *argv, "--shutdown-grace-period", "60", stderr=asyncio.subprocess.PIPE
    )
    frontend = _Frontend(proc)
    await frontend.listening()
    target = f"127.0.0.1:{frontend.grpc_port}"
    long_tokens = 500  # the mock steps every 10 ms: about 5 s in flight (within its 512 positions)
    async with raw_client(target) as (stub, health):
        watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE_NAME))
        assert (await asyncio.wait_for(watch.read(), 30)).status == SERVING
        running = stub.Generate(grpc_request("in-flight", max_tokens=long_tokens))
        outputs = [await asyncio.wait_for(running.read(), 30)]
        proc.send_signal(signal.SIGTERM)
        assert (await asyncio.wait_for(watch.read(), 30)).status == NOT_SERVING
        refusals: list[tuple[int, grpc.StatusCode, str]] = []
        ended = False
        while not ended:  # a new call after every 50 outputs of the running one, until it ends
            try:
                await stub.Generate(grpc_request(f"during-{len(refusals)}", max_tokens=2)).read()
            except grpc.aio.AioRpcError as exc:
                refusals.append((len(outputs), exc.code(), exc.details() or ""))
            else:
                raise AssertionError("a call made during the drain was served")
            for _ in range(50):
                out = await asyncio.wait_for(running.read(), 30)
                if out is grpc.aio.EOF:
                    ended = True
                    break
                outputs.append(out)
        watch.cancel()
    tokens = sum(len(o.token_ids) for o in outputs)
    assert tokens == long_tokens and outputs[-1].finish_reason is not None, outputs[-1]
    assert len(refusals) >= 10, refusals  # refusals spread over the whole drain, seconds of it
    for at, code, details in refusals:
        assert (code, "draining" in details) == (grpc.StatusCode.UNAVAILABLE, True), (at, code, details)
    assert await frontend.wait() == 0
