"""Faults with real processes on loopback: a worker SIGKILLed mid-stream and restarted, a stalled worker
(before its first output, and mid-stream), a SIGTERM drain under load; and, in process, engine failure
and pause while streams run."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.reliability.sse import Streamed, completion, stream_completion
from tests.support.cluster import Cluster, no_engine_work
from tests.support.grpc_serving import request as grpc_request
from tests.support.timing import MARGIN, PATIENCE
from vllm_frontend_testing.processes import Frontend, mock_worker, router_over, until
from vllm_llm import GenerateStream, Unavailable
from vllm_llm.wire import SERVICE_NAME
from vllm_remote_llm import Keepalive, RemoteLlm

Processes = tuple[Frontend, list[Frontend]]


def _client(base_url: str, timeout: float) -> httpx.AsyncClient:
    """A client that drops a pooled connection after 1 s idle: the server closes one idle for 5 s
    (uvicorn's keep-alive, as in vLLM), and a request sent on a connection the server is closing at
    that moment is reset (httpx.ReadError). These tests pause (a worker restart) for about that long."""
    return httpx.AsyncClient(base_url=base_url, timeout=timeout, limits=httpx.Limits(keepalive_expiry=1))


@pytest_asyncio.fixture
async def two_workers(tiny_model_dir: Path) -> AsyncIterator[Processes]:
    """Two `--mock` worker processes and a router process over both."""
    workers = list(await asyncio.gather(mock_worker(), mock_worker()))
    router = await router_over(workers, tiny_model_dir)
    try:
        yield router, workers
    finally:
        await asyncio.gather(*(f.stop() for f in (router, *workers)))


async def _started(
    http: httpx.AsyncClient, n: int, max_tokens: int
) -> tuple[list[Streamed], list[asyncio.Task[Streamed]]]:
    """`n` streams running, each having delivered its first chunk."""
    streams = [Streamed() for _ in range(n)]
    tasks = [
        asyncio.create_task(stream_completion(http, completion(i, max_tokens), s))
        for i, s in enumerate(streams)
    ]
    await asyncio.wait_for(asyncio.gather(*(s.first.wait() for s in streams)), PATIENCE)
    return streams, tasks


async def _chat_ok(http: httpx.AsyncClient, i: int) -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": f"hi {i}"}], "max_tokens": 4}
    response = await http.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text[:300]


async def test_a_worker_killed_mid_stream_then_restarted(two_workers: Processes) -> None:
    router, workers = two_workers
    async with _client(router.base_url, timeout=60) as http:
        _, tasks = await _started(http, 16, max_tokens=400)  # ~4 s per stream at 10 ms a token
        ended_at: dict[asyncio.Task[Streamed], float] = {}
        for task in tasks:
            task.add_done_callback(lambda done: ended_at.setdefault(done, time.monotonic()))
        await workers[0].kill()
        ended = await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE)
        broken = [s for s in ended if s.errors]
        whole = [s for s in ended if not s.errors]
        # round_robin placed about half on the killed worker: those end at once with a clear error ...
        assert broken and whole, [s.finish_reasons for s in ended]
        # ... "at once": before any stream still running could have finished (not at a keepalive bound)
        broken_at = max(ended_at[t] for t, s in zip(tasks, ended, strict=True) if s.errors)
        whole_at = min(ended_at[t] for t, s in zip(tasks, ended, strict=True) if not s.errors)
        assert broken_at < whole_at, f"a broken stream ended {broken_at - whole_at:.1f} s after a whole one"
        for s in broken:
            assert s.errors[0]["code"] == 503, s.errors
            assert s.done  # the error event, then [DONE]: the client is never left hanging
        # ... the others finish whole, on the surviving worker
        for s in whole:
            assert s.finish_reasons == ["length"] and s.done
        await asyncio.gather(*(_chat_ok(http, i) for i in range(20)))  # new requests: the healthy worker

        await workers[0].restart()  # same ports; the router is not restarted
        await workers[1].kill()  # only the restarted worker is left to serve
        await until(
            lambda: _chat_succeeds(http), within=15, what="the router serving from the restarted worker"
        )
        await asyncio.gather(*(_chat_ok(http, i) for i in range(10)))


async def _chat_succeeds(http: httpx.AsyncClient) -> bool:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "again"}], "max_tokens": 2}
    response = await http.post("/v1/chat/completions", json=body)
    assert response.status_code in (200, 503), response.text[:300]  # 503 until it reconnected
    return response.status_code == 200


async def test_a_stalled_worker_hits_the_deadline(tiny_model_dir: Path) -> None:
    worker = await mock_worker()
    deadline = 1.0
    router = await router_over([worker], tiny_model_dir, "--remote-timeout", str(deadline))
    try:
        async with _client(router.base_url, timeout=30) as http:
            await _chat_ok(http, 0)
            worker.signal(signal.SIGSTOP)
            started = time.monotonic()
            stalled = await http.post("/v1/completions", json=completion(1, 4))
            took = time.monotonic() - started
            assert stalled.status_code == 503, stalled.text[:300]
            assert stalled.json()["error"]["type"] == "ServiceUnavailableError"
            # Well before keepalive (10 s at the very least) would have failed the call.
            assert deadline - 0.1 < took < deadline + MARGIN, f"the 1 s deadline fired after {took:.2f} s"
            worker.signal(signal.SIGCONT)
            await _chat_ok(http, 2)
    finally:
        await asyncio.gather(router.stop(), worker.stop())


async def test_a_worker_stalled_mid_stream_hits_the_idle_bound(tiny_model_dir: Path) -> None:
    """SIGSTOP after the first chunk: the router's idle bound (2 s here) ends the stream with a 503 event.

    Keepalive would catch the stop too, but only after its 10 s ping timeout: the error names the idle
    bound, and comes before keepalive's could.
    """
    idle = 2.0
    worker = await mock_worker()
    router = await router_over([worker], tiny_model_dir, "--remote-idle-timeout", str(idle))
    try:
        async with _client(router.base_url, timeout=30) as http:
            stream = Streamed()
            task = asyncio.create_task(stream_completion(http, completion(0, 500), stream))  # ~5 s
            await asyncio.wait_for(stream.first.wait(), 30)
            worker.signal(signal.SIGSTOP)
            stalled = time.monotonic()
            ended = await asyncio.wait_for(task, 20)
            took = time.monotonic() - stalled
            assert ended.errors and ended.errors[0]["code"] == 503, ended.frames[-2:]
            assert ended.done  # the error event, then [DONE]
            assert "idle timeout" in ended.errors[0]["message"], ended.errors
            assert idle - 0.1 < took < idle + MARGIN, f"the stalled stream ended {took:.1f} s after the stop"
            worker.signal(signal.SIGCONT)
            await _chat_ok(http, 1)  # the worker, resumed, serves again through the same router
    finally:
        await asyncio.gather(router.stop(), worker.stop())


async def test_a_worker_stalled_mid_stream_is_caught_by_keepalive() -> None:
    """No idle bound: keepalive alone (ping 5 s, ack within 1 s) fails the stalled call in a few seconds.

    It does because the channel sets `grpc.http2.ping_timeout_ms` (`_channel.py`); without it the ping
    in flight to the stopped worker has a 60 s watchdog and the stream hangs.
    """
    worker = await mock_worker()
    keepalive = Keepalive(time=5, timeout=1)
    remote = await RemoteLlm.connect(
        worker.grpc_target, keepalive=keepalive, idle_timeout=None, connect_timeout=30
    )
    try:
        stream = await remote.generate(grpc_request("stalled", max_tokens=100_000))
        for _ in range(20):
            await stream.__anext__()
        worker.signal(signal.SIGSTOP)
        stalled = time.monotonic()
        with pytest.raises(Unavailable):
            await asyncio.wait_for(_drain(stream), 20)
        took = time.monotonic() - stalled
        # Keepalive time + timeout at the most; without the ping timeout the stream hung for 60 s.
        assert took < keepalive.time + keepalive.timeout + MARGIN, (
            f"keepalive failed the stalled call after {took:.1f} s"
        )
    finally:
        await remote.shutdown()
        await worker.stop()


async def _drain(stream: GenerateStream) -> None:
    async for _ in stream:
        pass


async def test_sigterm_drains_a_worker_under_load_without_losing_a_request(two_workers: Processes) -> None:
    router, workers = two_workers
    async with _client(router.base_url, timeout=60) as http:
        _, tasks = await _started(http, 30, max_tokens=150)
        workers[0].signal(signal.SIGTERM)
        during = await asyncio.gather(*(stream_completion(http, completion(100 + i, 20)) for i in range(20)))
        ended = await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE)
        await workers[0].exits_cleanly(within=PATIENCE)  # exit 0, nothing of its group left
    for s in [*ended, *during]:
        assert s.status == 200 and not s.errors, s.frames[-1:]
        assert s.finish_reasons == ["length"] and s.done


async def test_an_engine_failure_is_reported_everywhere(cluster: Cluster) -> None:
    """MockLlm.fail(), the in-process analogue of the engine process dying (the real one: tests/soak)."""
    cluster.mock.step_interval = 0.01  # 500 tokens: 5 s, far longer than the test needs
    async with _client(cluster.worker.base_url, timeout=30) as http:
        _, tasks = await _started(http, 4, max_tokens=500)
        async with grpc.aio.insecure_channel(cluster.worker.grpc_target) as channel:
            watch = health_pb2_grpc.HealthStub(channel).Watch(
                health_pb2.HealthCheckRequest(service=SERVICE_NAME)
            )
            assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
            cluster.mock.fail("the engine process died")
            assert (
                await asyncio.wait_for(watch.read(), 10)
            ).status == health_pb2.HealthCheckResponse.NOT_SERVING
            watch.cancel()
        ended = await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE)
        assert all(s.errors and s.errors[0]["code"] == 500 and s.done for s in ended), [
            (s.errors, s.done, s.frames[-1:]) for s in ended
        ]
        assert (await http.get("/health")).status_code == 503
        assert (await http.get("/ready")).status_code == 503
        refused = await http.post("/v1/completions", json=completion(0, 4))
        assert refused.status_code >= 500 and refused.json()["error"]["type"].endswith("Error")
    # the router: unready (not failed) once no worker serves; its requests get 503
    await asyncio.wait_for(cluster.router.state.subscribe_readiness().wait_for(lambda ready: not ready), 10)
    async with _client(cluster.router.base_url, timeout=30) as http:
        assert (await http.get("/health")).status_code == 200
        assert (await http.post("/v1/completions", json=completion(0, 4))).status_code == 503
    assert cluster.mock.num_running == 0


async def test_pause_during_streams_loses_nothing(cluster: Cluster) -> None:
    async with _client(cluster.router.base_url, timeout=60) as http:
        expected = [await stream_completion(http, completion(i, 60)) for i in range(3)]
        _, tasks = await _started(http, 30, max_tokens=60)
        cluster.mock.pause()
        await asyncio.wait_for(
            cluster.router.state.subscribe_readiness().wait_for(lambda ready: not ready), 10
        )
        refused = await http.post("/v1/completions", json=completion(99, 4))
        assert refused.status_code == 503, refused.text[:300]
        cluster.mock.resume()
        ended = await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE)
    for i, s in enumerate(ended):
        assert not s.errors and s.finish_reasons == ["length"] and s.done
        if i < len(expected):
            assert s.text == expected[i].text  # every token, once, in order
    await no_engine_work(cluster.mock)


async def test_clients_that_disconnect_leave_no_engine_work(cluster: Cluster) -> None:
    # 500 tokens: 25 s, so a request that ended sooner was aborted, however slowly a loaded machine
    # noticed the disconnect (direct to the worker it took 0.9 s here, at a moderate load).
    cluster.mock.step_interval = 0.05
    for rounds, base in enumerate((cluster.router.base_url, cluster.worker.base_url), 1):
        async with _client(base, timeout=30) as http:
            _, tasks = await _started(http, 40, max_tokens=500)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        await no_engine_work(cluster.mock, within=PATIENCE)
        # Every one was aborted, none ran to its end: the disconnects ended them.
        assert len(cluster.mock.aborted) == 40 * rounds
    assert not cluster.remote._calls  # the RemoteLlm forgot every call
