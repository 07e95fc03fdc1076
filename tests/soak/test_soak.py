"""Long variants of tests/reliability: sustained load, a real engine process killed, a long outage,
and a worker stalled mid-stream. Run with `make soak` (minutes, and one real vLLM engine)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

import grpc
import httpx
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.reliability.sse import Streamed, completion, stream_completion
from tests.support.timing import MARGIN
from vllm_frontend_testing.processes import Frontend, mock_worker, router_over, until
from vllm_llm.wire import SERVICE_NAME
from vllm_remote_llm._channel import MAX_RECONNECT_BACKOFF_MS
from vllm_remote_llm.remote import DEFAULT_KEEPALIVE

ROOT = Path(__file__).resolve().parents[2]
ROUNDS, STREAMS, TOKENS = 12, 2000, 100
#: RSS after each round (2,000 streams at once) sits on the allocator's high-water mark: a run of 12
#: rounds read 14, 21, 22, 22, 25, 21, 34, 25, 24, 22, 21, 24 MiB above the post-warm-up baseline. A leak
#: is a trend: the second half's peak may exceed the first half's by at most TREND_TOLERANCE_MIB.
TREND_TOLERANCE_MIB = 16
RSS_CEILING_MIB = 64


async def test_sustained_load_keeps_memory_flat() -> None:
    """`python -m tests.reliability.load` in a fresh process: 12 rounds after a warm-up, no upward trend."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.reliability.load",
        str(STREAMS),
        str(TOKENS),
        str(ROUNDS),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 1200)
    assert proc.returncode == 0, err.decode()[-3000:]
    report = json.loads(out)
    assert report["tokens"] == ROUNDS * STREAMS * TOKENS
    assert report["running"] == 0 and report["calls"] == 0
    assert report["live_after"] == report["live_before"], report
    per_round = report["rss_grown_mib_per_round"]
    half = len(per_round) // 2
    assert max(per_round[half:]) - max(per_round[:half]) < TREND_TOLERANCE_MIB, per_round
    assert max(per_round) < RSS_CEILING_MIB, per_round


async def test_killing_the_engine_process_makes_the_worker_unhealthy(tiny_model_dir: Path) -> None:
    worker = await Frontend.start(
        "--model",
        str(tiny_model_dir),
        "--served-model-name",
        "tiny",
        "--dtype",
        "float32",
        "--max-model-len",
        "512",
        "--enforce-eager",
        "--grpc-port",
        "0",
    )
    try:
        async with httpx.AsyncClient(base_url=worker.base_url, timeout=60) as http:
            await until(lambda: _ok(http, "/ready"), within=300, what="the engine ready")
            stream = Streamed()
            task = asyncio.create_task(stream_completion(http, completion(0, 500), stream))
            await asyncio.wait_for(stream.first.wait(), 60)
            assert worker.proc is not None
            engines = _descendants(worker.proc.pid)
            assert engines, "no engine-core process under the worker"
            for pid in engines:
                os.kill(pid, signal.SIGKILL)
            async with grpc.aio.insecure_channel(worker.grpc_target) as channel:
                watch = health_pb2_grpc.HealthStub(channel).Watch(
                    health_pb2.HealthCheckRequest(service=SERVICE_NAME)
                )
                while (
                    await asyncio.wait_for(watch.read(), 60)
                ).status != health_pb2.HealthCheckResponse.NOT_SERVING:
                    pass
                watch.cancel()
            ended = await asyncio.wait_for(task, 60)
            assert ended.errors and ended.done, ended.frames[-1:]
            assert (await http.get("/health")).status_code == 503
            assert (await http.post("/v1/completions", json=completion(1, 4))).status_code >= 500
    finally:
        await worker.stop()


def _descendants(pid: int) -> list[int]:
    """The processes below `pid` (the engine core and its helpers), from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [c for c, p in parents.items() if p == parent]
        found += children
        frontier += children
    return found


async def _ok(http: httpx.AsyncClient, path: str) -> bool:
    try:
        return (await http.get(path)).status_code == 200
    except httpx.TransportError:
        return False


async def test_a_worker_back_after_a_long_outage_is_used_within_seconds(tiny_model_dir: Path) -> None:
    """Reconnection backoff is capped (MAX_RECONNECT_BACKOFF_MS); gRPC's own default grows to 120 s."""
    worker = await mock_worker()
    router = await router_over([worker], tiny_model_dir)
    try:
        async with httpx.AsyncClient(base_url=router.base_url, timeout=30) as http:
            assert (await http.post("/v1/completions", json=completion(0, 4))).status_code == 200
            await worker.kill()
            await asyncio.sleep(45)  # the outage itself is what is tested: backoff grows while it lasts
            await worker.restart()
            # One capped reconnection backoff; gRPC's own, grown over 45 s of outage, would be far longer.
            await until(
                lambda: _completes(http),
                within=MAX_RECONNECT_BACKOFF_MS / 1000 + MARGIN,
                what="the router using the restarted worker",
            )
    finally:
        await asyncio.gather(router.stop(), worker.stop())


async def _completes(http: httpx.AsyncClient) -> bool:
    return (await http.post("/v1/completions", json=completion(0, 4))).status_code == 200


async def test_a_worker_stalled_mid_stream_is_detected_by_keepalive(tiny_model_dir: Path) -> None:
    """A SIGSTOPped worker answers no ping: with the router's default keepalive (30 s, 10 s) and its idle
    bound off, the stream ends with a 503 event in < 45 s (keepalive time + timeout, plus slack).

    It holds because the channel sets `grpc.http2.ping_timeout_ms` to the keepalive timeout: the ping in
    flight at the stall (usually a BDP ping) then fails the connection after 10 s; without it that
    ping's watchdog is gRPC's 60 s default and keepalive adds none, so the stream hung (> 60 s).
    """
    worker = await mock_worker()
    router = await router_over([worker], tiny_model_dir, "--remote-idle-timeout", "0")
    try:
        async with httpx.AsyncClient(base_url=router.base_url, timeout=120) as http:
            stream = Streamed()
            task = asyncio.create_task(stream_completion(http, completion(0, 500), stream))
            await asyncio.wait_for(stream.first.wait(), 30)
            worker.signal(signal.SIGSTOP)
            stalled = time.monotonic()
            ended = await asyncio.wait_for(task, 60)
            # Below the 60 s the in-flight ping's default watchdog would take.
            assert time.monotonic() - stalled < DEFAULT_KEEPALIVE.time + DEFAULT_KEEPALIVE.timeout + MARGIN
            assert ended.errors and ended.errors[0]["code"] == 503 and ended.done
    finally:
        await asyncio.gather(router.stop(), worker.stop())
