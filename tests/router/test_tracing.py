"""Acceptance (issue #20): one chat request through a router and its worker is one OpenTelemetry trace.

A worker over the real engine and a router over it, both `vllm-frontend serve` processes exporting to
an OTLP collector in this process (`--otlp-traces-endpoint`). The client's W3C `traceparent` is the
root: the router's HTTP span is its child, the router's `llm_request` the HTTP span's, and the
worker's `llm_request` the router's (the context crossed `vllm.internal.Llm` in `trace_headers`).

`traced_pair` (module-scoped, one engine start) also runs both with `--enable-log-requests`, so a test
can read their output (`Frontend.log`).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio
from openai import AsyncOpenAI
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as pb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from opentelemetry.proto.trace.v1.trace_pb2 import Status as StatusProto

from vllm_frontend_testing.processes import Frontend, until

pytestmark = pytest.mark.asyncio(loop_scope="session")

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
#: How long the spans may take to reach the collector (batch delay, export, a loaded machine).
SPANS_WITHIN = 60.0


@dataclass(frozen=True)
class ReceivedSpan:
    """A span as the collector received it (ids in hex)."""

    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    kind: int
    status: int
    attributes: dict[str, Any]
    resource: dict[str, Any]

    @property
    def pid(self) -> int:
        """The process that made it (vLLM's resource attribute `vllm.process_id`)."""
        return int(self.resource["vllm.process_id"])


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return None if which is None else getattr(value, which)


def _attributes(pairs: Any) -> dict[str, Any]:
    found: list[KeyValue] = list(pairs)
    return {kv.key: _value(kv.value) for kv in found}


class Collector:
    """An OTLP gRPC trace collector (`TraceService/Export`) keeping every span it receives."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self._changed = asyncio.Condition()
        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)  # type: ignore[no-untyped-call]
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        """The `--otlp-traces-endpoint` to export here."""
        return f"grpc://127.0.0.1:{self.port}"

    async def start(self) -> None:
        await self._server.start()

    async def stop(self) -> None:
        await self._server.stop(0)

    async def Export(
        self, request: pb.ExportTraceServiceRequest, context: Any
    ) -> pb.ExportTraceServiceResponse:
        received = [
            ReceivedSpan(
                trace_id=span.trace_id.hex(),
                span_id=span.span_id.hex(),
                parent_span_id=span.parent_span_id.hex(),
                name=span.name,
                kind=span.kind,
                status=span.status.code,
                attributes=_attributes(span.attributes),
                resource=_attributes(resource_spans.resource.attributes),
            )
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        async with self._changed:
            self.spans.extend(received)
            self._changed.notify_all()
        return pb.ExportTraceServiceResponse()

    async def wait_for(
        self, ready: Callable[[list[ReceivedSpan]], bool], within: float
    ) -> list[ReceivedSpan]:
        """The spans received once `ready(spans)` holds (a deadline, no polling)."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: ready(self.spans)), within)
            return list(self.spans)


@dataclass(frozen=True)
class TracedPair:
    """The collector, the worker (real engine) and the router over it; both processes trace to it."""

    collector: Collector
    worker: Frontend
    router: Frontend


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def traced_pair(tiny_model_dir: Path) -> AsyncIterator[TracedPair]:
    collector = Collector()
    await collector.start()
    env = {**os.environ, "OTEL_BSP_SCHEDULE_DELAY": "100"}  # export batches every 100 ms, not 5 s
    common = (
        "--otlp-traces-endpoint",
        collector.endpoint,
        "--enable-log-requests",
        "--served-model-name",
        "tiny",
    )
    started: list[Frontend] = []
    try:
        worker = await Frontend.start(
            "--model", str(tiny_model_dir), "--dtype", "float32", "--max-model-len", "512",
            "--grpc-port", "0", *common, env=env,
        )  # fmt: skip
        started.append(worker)
        await worker.wait_serving()
        router = await Frontend.start("--remote", worker.grpc_target, "--grpc-port", "-1", *common, env=env)
        started.append(router)
        await router.wait_serving()
        yield TracedPair(collector, worker, router)
    finally:
        await asyncio.gather(*(front.stop(30) for front in reversed(started)))
        await collector.stop()


def _in_trace(spans: list[ReceivedSpan], name: str, pid: int) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == TRACE_ID and s.name == name and s.pid == pid]


async def test_one_chat_request_is_one_trace_from_the_router_to_the_worker(traced_pair: TracedPair) -> None:
    collector, worker, router = traced_pair.collector, traced_pair.worker, traced_pair.router
    async with AsyncOpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0) as client:
        chat = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=6,
            temperature=0.5,
            extra_headers={"traceparent": TRACEPARENT},
        )
    assert chat.usage is not None

    def complete(spans: list[ReceivedSpan]) -> bool:
        return (
            len(_in_trace(spans, "POST /v1/chat/completions", router.pid)) == 1
            and len(_in_trace(spans, "llm_request", router.pid)) == 1
            and len(_in_trace(spans, "llm_request", worker.pid)) == 1
        )

    try:
        spans = await collector.wait_for(complete, SPANS_WITHIN)
    except TimeoutError:
        got = sorted((s.name, s.pid, s.trace_id) for s in collector.spans)
        raise AssertionError(f"the trace is incomplete; received {got}") from None
    (http,) = _in_trace(spans, "POST /v1/chat/completions", router.pid)
    (at_router,) = _in_trace(spans, "llm_request", router.pid)
    (at_worker,) = _in_trace(spans, "llm_request", worker.pid)

    # Parent and child: client → router HTTP → router llm_request → worker llm_request.
    assert http.parent_span_id == CLIENT_SPAN
    assert at_router.parent_span_id == http.span_id
    assert at_worker.parent_span_id == at_router.span_id
    # The worker was reached over vllm.internal.Llm: no HTTP span of its own in this trace.
    assert [s.name for s in spans if s.trace_id == TRACE_ID and s.pid == worker.pid] == ["llm_request"]
    assert {http.kind, at_router.kind, at_worker.kind} == {SpanProto.SPAN_KIND_SERVER}
    assert {http.status, at_router.status, at_worker.status} == {StatusProto.STATUS_CODE_UNSET}
    assert http.attributes["http.route"] == "/v1/chat/completions"
    assert http.attributes["http.response.status_code"] == 200
    assert {http.resource["service.name"], at_worker.resource["service.name"]} == {"vllm-frontend"}

    # vLLM's gen_ai attributes on the worker's span, the same request id on both sides of the hop.
    attrs = at_worker.attributes
    assert attrs["gen_ai.request.id"] == at_router.attributes["gen_ai.request.id"]
    assert attrs["gen_ai.request.id"].startswith("chatcmpl-")
    assert attrs["gen_ai.usage.prompt_tokens"] == chat.usage.prompt_tokens
    assert attrs["gen_ai.usage.completion_tokens"] == chat.usage.completion_tokens
    assert (attrs["gen_ai.request.max_tokens"], attrs["gen_ai.request.temperature"]) == (6, 0.5)
    assert attrs["gen_ai.request.n"] == 1
    assert 0 < attrs["gen_ai.latency.time_to_first_token"] <= attrs["gen_ai.latency.e2e"]
    # The engine's phases, from the final output's timings (EngineCoreLlm fills them in).
    queue = attrs["gen_ai.latency.time_in_queue"]
    prefill = attrs["gen_ai.latency.time_in_model_prefill"]
    decode = attrs["gen_ai.latency.time_in_model_decode"]
    inference = attrs["gen_ai.latency.time_in_model_inference"]
    assert min(queue, prefill, decode) >= 0 and inference == pytest.approx(prefill + decode)
    assert inference <= attrs["gen_ai.latency.e2e"]


async def test_the_access_and_request_logs_follow_one_request_id_through_both(
    traced_pair: TracedPair,
) -> None:
    """uvicorn's access line at the router; the request log at both, under the client's X-Request-Id."""
    worker, router = traced_pair.worker, traced_pair.router
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    async with httpx.AsyncClient(base_url=router.base_url, timeout=120) as http:
        response = await http.post("/v1/chat/completions", json=body, headers={"X-Request-Id": "follow-me-7"})
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == "follow-me-7"
    received = re.compile(r"Received request chatcmpl-follow-me-7: params: SamplingParams\(.*max_tokens=2")
    access = re.compile(r'INFO: +127\.0\.0\.1:\d+ - "POST /v1/chat/completions HTTP/1\.1" 200')

    def logged(front: Frontend, line: re.Pattern[str]) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return any(line.search(text) for text in front.log)

        return check

    await until(logged(router, access), within=30, what="the router's access log line")
    await until(logged(router, received), within=30, what="the router's request log line")
    await until(logged(worker, received), within=30, what="the worker's request log line")
    # the worker was reached over gRPC: no HTTP access line of its own for the request
    assert not any("/v1/chat/completions" in text for text in worker.log)
