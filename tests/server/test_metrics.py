"""/metrics: vLLM's request metrics wherever the tokens pass, engine metrics only where an engine is read.

A server over a provided Llm (a mock here; a router over the session worker below) exposes no engine
gauge or counter: it has no engine to read them from. The per-phase histograms (queue, prefill, decode,
inference, preemptions, time per output token) come from the `timings` of each request's final output,
so a router records the values its worker's engine measured.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import msgspec
import pytest
import pytest_asyncio

from tests.support.delegating import DelegatingLlm
from tests.support.http_serving import MODEL, Served, serve, server_state
from tests.support.metrics import families, sample
from tests.support.servers import RunningServer, start_server
from vllm_llm import GenerateStream, Llm, MockLlm
from vllm_llm.wire import GenerateOutput, GenerateRequest, RequestTimings
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.metrics import request_tokens_buckets
from vllm_server.source import LlmSource

#: Families only an engine knows (vLLM's scheduler / iteration / cache stats and engine info).
ENGINE_FAMILIES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:num_requests_waiting_by_reason",
    "vllm:kv_cache_usage_perc",
    "vllm:engine_sleep_state",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
    "vllm:mm_cache_queries",
    "vllm:mm_cache_hits",
    "vllm:num_preemptions",
    "vllm:prompt_tokens_by_source",
    "vllm:prompt_tokens_cached",
    "vllm:prompt_tokens_cached_by_source",
    "vllm:iteration_tokens_total",
    "vllm:cache_config_info",
    "vllm:lora_requests_info",
}

TIMINGS = RequestTimings(
    queued_time=0.25, prefill_time=1.5, decode_time=3.0, inference_time=4.5, num_preemptions=2
)


class Timed(DelegatingLlm):
    """An Llm whose final outputs carry engine timings, as a worker's engine with stats sends them."""

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        inner = await self.inner.generate(request)

        async def outputs() -> AsyncIterator[GenerateOutput]:
            async for out in inner:
                if out.finish_reason is not None:
                    out = msgspec.structs.replace(out, timings=TIMINGS)
                yield out

        return GenerateStream(inner.request_id, outputs(), inner.aclose)


async def test_a_server_over_a_provided_llm_exposes_no_engine_metric(mock_server: Served) -> None:
    await mock_server.client.completions.create(model=MODEL, prompt="hello", max_tokens=3, n=2)
    text = (await mock_server.http.get("/metrics")).text
    found = families(text)
    assert not ENGINE_FAMILIES & set(found), ENGINE_FAMILIES & set(found)
    assert "vllm:healthy" not in found and "vllm:ready" not in found
    assert sample(text, "vllm_frontend:healthy", model_name=MODEL) == 1.0
    assert sample(text, "vllm_frontend:ready", model_name=MODEL) == 1.0
    labels = {"model_name": MODEL, "engine": "frontend"}
    assert sample(text, "vllm:request_success_total", finished_reason="length", **labels) == 1.0
    assert sample(text, "vllm:generation_tokens_total", **labels) == 6.0
    assert sample(text, "vllm:request_params_n_count", **labels) == 1.0
    assert sample(text, "vllm:request_params_n_sum", **labels) == 2.0
    # No engine timings arrived (the mock sends none): no per-phase sample was invented.
    assert sample(text, "vllm:request_queue_time_seconds_count", **labels) == 0.0
    # vLLM's bucket boundaries (request_tokens: 1-2-5 up to max_model_len).
    prompt = found["vllm:request_prompt_tokens"]
    bounds = [float(s.labels["le"]) for s in prompt.samples if s.name.endswith("_bucket")]
    assert bounds[:-1] == [float(b) for b in request_tokens_buckets(512)] and bounds[-1] == float("inf")


async def test_timings_received_with_the_final_output_fill_the_per_phase_histograms(
    mock_llm: MockLlm,
) -> None:
    llm: Llm = Timed(mock_llm)
    async with serve(server_state(llm)) as served:
        await served.client.completions.create(model=MODEL, prompt="hello", max_tokens=4)
        text = (await served.http.get("/metrics")).text
    labels = {"model_name": MODEL, "engine": "frontend"}
    for name, value in (
        ("vllm:request_queue_time_seconds", 0.25),
        ("vllm:request_prefill_time_seconds", 1.5),
        ("vllm:request_decode_time_seconds", 3.0),
        ("vllm:request_inference_time_seconds", 4.5),
        ("vllm:request_num_preemptions", 2.0),
        ("vllm:request_time_per_output_token_seconds", 1.0),  # decode time over the 3 tokens after the first
        ("vllm:request_params_max_tokens", 4.0),
    ):
        assert sample(text, f"{name}_count", **labels) == 1.0, name
        assert sample(text, f"{name}_sum", **labels) == value, name


def test_request_token_buckets_are_vllms_1_2_5_series() -> None:
    assert request_tokens_buckets(512) == (1, 2, 5, 10, 20, 50, 100, 200, 500)
    assert request_tokens_buckets(1000) == (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


# ---- a router over the session worker --------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def router(worker: RunningServer) -> AsyncIterator[RunningServer]:
    """A router (a server over RemoteLlm) in front of the session worker."""
    remote = await RemoteLlm.connect(worker.grpc_target)
    server = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(remote))
    yield server
    await server.stop()
    await remote.shutdown()


async def _scrape(server: RunningServer) -> str:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=60) as http:
        return (await http.get("/metrics")).text


PHASES = (
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:request_inference_time_seconds",
    "vllm:request_num_preemptions",
    "vllm:request_time_per_output_token_seconds",
)


async def test_a_router_records_its_workers_timings_and_no_engine_gauge(
    worker: RunningServer, router: RunningServer
) -> None:
    worker_before, router_before = await _scrape(worker), await _scrape(router)
    async with httpx.AsyncClient(base_url=router.base_url, timeout=120) as http:
        response = await http.post(
            "/v1/completions",
            json={
                "model": "tiny",
                "prompt": "the router",
                "max_tokens": 5,
                "temperature": 0,
                "ignore_eos": True,
            },
        )
        assert response.status_code == 200, response.text
    worker_after, router_after = await _scrape(worker), await _scrape(router)

    found = families(router_after)
    assert not ENGINE_FAMILIES & set(found), ENGINE_FAMILIES & set(found)
    on_router = {"engine": "frontend"}
    on_worker = {"engine": "0"}
    for name in PHASES:
        assert (
            sample(router_after, f"{name}_count", **on_router)
            - sample(router_before, f"{name}_count", **on_router)
            == 1.0
        ), name
        # The router's sample is the worker engine's measurement, received over the wire.
        got = sample(router_after, f"{name}_sum", **on_router) - sample(
            router_before, f"{name}_sum", **on_router
        )
        measured = sample(worker_after, f"{name}_sum", **on_worker) - sample(
            worker_before, f"{name}_sum", **on_worker
        )
        assert got == pytest.approx(measured, rel=1e-9, abs=1e-12), name
    assert sample(router_after, "vllm:request_prefill_time_seconds_sum", **on_router) > 0.0
    # The routed request counted on the worker too (vllm.internal.Llm/Generate records it).
    for text_before, text_after, labels in (
        (router_before, router_after, on_router),
        (worker_before, worker_after, on_worker),
    ):
        success = "vllm:request_success_total"
        rose = sample(text_after, success, finished_reason="length", **labels) - sample(
            text_before, success, finished_reason="length", **labels
        )
        assert rose == 1.0
        tokens = sample(text_after, "vllm:generation_tokens_total", **labels) - sample(
            text_before, "vllm:generation_tokens_total", **labels
        )
        assert tokens == 5.0
