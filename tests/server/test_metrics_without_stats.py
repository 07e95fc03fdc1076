"""`--disable-log-stats` on a worker: no `vllm:` family is recorded or exposed, as on vLLM's server.

vLLM's server makes its PrometheusStatLogger only while its AsyncLLM logs stats (`if self.log_stats:` in
vllm/v1/engine/async_llm.py); started with `--disable-log-stats`, its /metrics carries the HTTP
instrumentator's and the Python process's families and no `vllm:` one (seen on vLLM 0.32's server over
the tiny model). Our own families (`vllm_frontend:`) stay, as vLLM's instrumentator's do.

A router has no such flag: over this worker it still records the requests it serves. vLLM's server with the
flag runs beside our worker here, on the same request, as the oracle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from tests.support.metrics import families, sample
from tests.support.servers import start_server
from tests.support.vllm_server import vllm_server, worker_process
from vllm_frontend_testing.processes import Frontend, ServerProcess
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def quiet_worker(tiny_model_dir: Path) -> AsyncIterator[Frontend]:
    """A worker over its own engine core, started with `--disable-log-stats`."""
    async with worker_process(
        "--model", str(tiny_model_dir), "--dtype", "float32", "--max-model-len", "512",
        "--served-model-name", "tiny", "--grpc-port", "0", "--disable-log-stats",
    ) as front:  # fmt: skip
        yield front


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def quiet_vllm(
    quiet_worker: Frontend, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerProcess]:
    """vLLM's own server with the same flags, started once our worker is up (one engine starting at once)."""
    async with vllm_server(
        tiny_model_dir,
        *("--dtype", "float32", "--max-model-len", "512", "--enforce-eager", "--disable-log-stats"),
        log_dir=tmp_path_factory.mktemp("quiet_vllm"),
    ) as server:
        yield server


async def _chat_then_metrics(base_url: str) -> str:
    """One streaming chat of 5 tokens (the official client), then the server's /metrics text."""
    async with AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as client:
        stream = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
        )
        chunks = [chunk async for chunk in stream]
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 5
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as http:
        return (await http.get("/metrics")).text


def _vllm_families(text: str) -> list[str]:
    return sorted(name for name in families(text) if name.startswith("vllm:"))


async def test_a_worker_without_stats_serves_and_exposes_no_vllm_metric(quiet_worker: Frontend) -> None:
    text = await _chat_then_metrics(quiet_worker.base_url)
    assert _vllm_families(text) == []
    assert sample(text, "vllm_frontend:ready", model_name="tiny") == 1.0
    served = {"handler": "/v1/chat/completions", "method": "POST", "status": "200"}
    assert sample(text, "vllm_frontend:http_requests_total", **served) == 1.0


async def test_a_router_over_it_records_what_it_serves_and_the_worker_still_nothing(
    quiet_worker: Frontend,
) -> None:
    remote = await RemoteLlm.connect(quiet_worker.grpc_target)
    router = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(remote))
    try:
        async with httpx.AsyncClient(base_url=router.base_url, timeout=120) as http:
            response = await http.post(
                "/v1/completions",
                json={"model": "tiny", "prompt": "the router", "max_tokens": 4, "ignore_eos": True},
            )
            assert response.status_code == 200, response.text
            routed = (await http.get("/metrics")).text
    finally:
        await router.stop()
        await remote.shutdown()
    async with httpx.AsyncClient(base_url=quiet_worker.base_url, timeout=60) as http:
        worker = (await http.get("/metrics")).text
    # The worker served it over vllm.internal.Llm and recorded nothing; the router measured it.
    assert _vllm_families(worker) == []
    on_router = {"model_name": "tiny", "engine": "frontend"}
    assert sample(routed, "vllm:generation_tokens_total", **on_router) == 4.0
    assert sample(routed, "vllm:request_success_total", finished_reason="length", **on_router) == 1.0
    # Its engine sent no timings (it logs no stats): no per-phase sample was invented on the router.
    assert sample(routed, "vllm:request_queue_time_seconds_count", **on_router) == 0.0


async def test_vllms_server_with_the_flag_exposes_no_vllm_metric_either(
    quiet_worker: Frontend, quiet_vllm: ServerProcess
) -> None:
    # The same request to both servers, both started with --disable-log-stats: the same vllm: families.
    theirs = await _chat_then_metrics(quiet_vllm.base_url)
    ours = await _chat_then_metrics(quiet_worker.base_url)
    assert _vllm_families(theirs) == _vllm_families(ours) == []
    # What vLLM keeps (its HTTP instrumentator) is there: the oracle did serve and count the request.
    assert sample(theirs, "http_requests_total", handler="/v1/chat/completions") >= 1.0
