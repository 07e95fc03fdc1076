"""Tracing in one process: `TracedLlm` over a MockLlm, the HTTP middleware, the endpoint check.

Spans go to the SDK's in-memory exporter through a provider of the test's own (not the process's).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode, Tracer

from tests.support.mock import tiny_mock
from tests.support.public_grpc import public_client
from tests.support.servers import start_server
from vllm_llm import EngineDead, GenerateStream, InvalidRequest, MockLlm
from vllm_llm.delegating import DelegatingLlm
from vllm_llm.wire import (
    FinishReason,
    GenerateOutput,
    GenerateRequest,
    LlmInfo,
    RequestTimings,
    SamplingParams,
)
from vllm_server.config import FrontendConfig, ServerConfig
from vllm_server.grpc.proto import inference_pb2 as inference_pb
from vllm_server.http.app import build_app
from vllm_server.server import Server
from vllm_server.source import LlmSource
from vllm_server.tracing import TracedLlm, TracingConfigError, check_endpoint
from vllm_server.wiring import build_state

TRACE_ID = 0x0AF7651916CD43DD8448EB211C80319C
CLIENT_SPAN = 0xB7AD6B7169203331
TRACEPARENT = f"00-{TRACE_ID:032x}-{CLIENT_SPAN:016x}-01"


class Spans:
    """A tracer whose finished spans are kept in memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer: Tracer = provider.get_tracer("test")

    def finished(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.exporter.get_finished_spans())

    def one(self, name: str) -> ReadableSpan:
        found = [s for s in self.finished() if s.name == name]
        assert len(found) == 1, [s.name for s in self.finished()]
        return found[0]


@pytest.fixture
def spans() -> Spans:
    return Spans()


@pytest_asyncio.fixture
async def mock(tiny_info: LlmInfo) -> AsyncIterator[MockLlm]:
    llm = MockLlm(info=tiny_info)
    yield llm
    await llm.shutdown()


def _request(**fields: object) -> GenerateRequest:
    base: dict[str, object] = {
        "request_id": "req-1",
        "prompt_token_ids": [5, 6, 7],
        "sampling_params": SamplingParams(max_tokens=4, temperature=0.5, top_p=0.9, ignore_eos=True),
    }
    return GenerateRequest(**(base | fields))  # type: ignore[arg-type]


async def _drain(stream: GenerateStream) -> list[GenerateOutput]:
    return [out async for out in stream]


async def test_the_span_is_the_child_of_the_trace_headers_and_their_parent_downstream(
    mock: MockLlm, spans: Spans
) -> None:
    llm = TracedLlm(mock, spans.tracer)
    outs = await _drain(
        await llm.generate(_request(trace_headers={"traceparent": TRACEPARENT, "x-tag": "a"}))
    )
    span = spans.one("llm_request")
    assert span.kind == SpanKind.SERVER
    assert span.context is not None and span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (TRACE_ID, CLIENT_SPAN)
    assert span.status.status_code == StatusCode.UNSET
    # What the inner Llm received names this span as its parent; other headers pass through.
    sent = mock.requests[0].trace_headers
    assert sent == {"traceparent": f"00-{TRACE_ID:032x}-{span.context.span_id:016x}-01", "x-tag": "a"}
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.request.id"] == "req-1"
    assert attrs["gen_ai.usage.prompt_tokens"] == 3
    assert attrs["gen_ai.usage.completion_tokens"] == sum(len(o.token_ids) for o in outs) == 4
    assert (attrs["gen_ai.request.max_tokens"], attrs["gen_ai.request.n"]) == (4, 1)
    assert (attrs["gen_ai.request.temperature"], attrs["gen_ai.request.top_p"]) == (0.5, 0.9)
    assert 0 <= attrs["gen_ai.latency.time_to_first_token"] <= attrs["gen_ai.latency.e2e"]  # type: ignore[operator]
    assert "gen_ai.latency.time_in_queue" not in attrs  # the mock's outputs carry no engine timings


async def test_without_trace_headers_the_current_span_is_the_parent(mock: MockLlm, spans: Spans) -> None:
    llm = TracedLlm(mock, spans.tracer)
    with spans.tracer.start_as_current_span("http") as http:
        await _drain(
            await llm.generate(_request(sampling_params=SamplingParams(max_tokens=2, temperature=0)))
        )
    span = spans.one("llm_request")
    assert span.context is not None and span.parent is not None
    assert span.parent.span_id == http.get_span_context().span_id
    attrs = dict(span.attributes or {})
    assert "gen_ai.request.temperature" not in attrs  # vLLM sets only the truthy parameters
    traceparent = (mock.requests[0].trace_headers or {})["traceparent"]
    assert traceparent.split("-")[1:3] == [
        f"{http.get_span_context().trace_id:032x}",
        f"{span.context.span_id:016x}",
    ]


async def test_the_engine_timings_of_the_final_output_become_vllms_phase_attributes(
    mock: MockLlm, spans: Spans
) -> None:
    timings = RequestTimings(queued_time=0.25, prefill_time=0.5, decode_time=1.5, inference_time=2.0)

    class Timed(DelegatingLlm):
        async def generate(self, request: GenerateRequest) -> GenerateStream:
            final = GenerateOutput(
                request_id=request.request_id,
                token_ids=[9],
                finish_reason=FinishReason.LENGTH,
                timings=timings,
            )
            return GenerateStream.of_final(final)

    await _drain(await TracedLlm(Timed(mock), spans.tracer).generate(_request()))
    attrs = dict(spans.one("llm_request").attributes or {})
    assert attrs["gen_ai.latency.time_in_queue"] == 0.25
    assert attrs["gen_ai.latency.time_in_model_prefill"] == 0.5
    assert attrs["gen_ai.latency.time_in_model_decode"] == 1.5
    assert attrs["gen_ai.latency.time_in_model_inference"] == 2.0


async def test_a_refused_request_and_a_failed_engine_end_the_span_with_an_error(
    mock: MockLlm, spans: Spans
) -> None:
    llm = TracedLlm(mock, spans.tracer)
    with pytest.raises(InvalidRequest):
        await llm.generate(_request(prompt_token_ids=[]))
    (refused,) = spans.finished()
    assert refused.status.status_code == StatusCode.ERROR
    assert [e.name for e in refused.events] == ["exception"]

    mock.step_interval = 0.01
    stream = await llm.generate(_request(request_id="req-2", sampling_params=SamplingParams(max_tokens=100)))
    await anext(stream)
    mock.fail("boom")
    with pytest.raises(EngineDead):
        await _drain(stream)
    failed = spans.finished()[1]
    assert failed.status.status_code == StatusCode.ERROR and "boom" in (failed.status.description or "")


async def test_an_abort_is_an_error_and_a_closed_stream_is_marked_aborted(
    mock: MockLlm, spans: Spans
) -> None:
    mock.step_interval = 0.01
    llm = TracedLlm(mock, spans.tracer)
    stream = await llm.generate(_request(sampling_params=SamplingParams(max_tokens=100)))
    await anext(stream)
    await llm.abort(["req-1"])
    outs = await _drain(stream)
    assert outs[-1].finish_reason == FinishReason.ABORT
    aborted = spans.one("llm_request")
    assert aborted.status.status_code == StatusCode.ERROR
    assert aborted.status.description == "finish_reason=abort"

    spans.exporter.clear()
    stream = await llm.generate(_request(request_id="req-2", sampling_params=SamplingParams(max_tokens=100)))
    await anext(stream)
    await stream.aclose()  # as the text layer does when a stop string matches
    closed = spans.one("llm_request")
    assert closed.status.status_code == StatusCode.UNSET
    assert [e.name for e in closed.events] == ["aborted"]
    assert mock.aborted == ["req-1", "req-2"]


async def test_the_http_span_is_the_clients_child_and_the_llm_requests_parent(
    mock: MockLlm, spans: Spans
) -> None:
    state = build_state(
        FrontendConfig(server=ServerConfig(served_model_name=("tiny",))), TracedLlm(mock, spans.tracer)
    )
    state.attach_layers()
    state.update_readiness()
    app = build_app(state, tracer=spans.tracer)
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        answer = await http.post("/v1/chat/completions", json=body, headers={"traceparent": TRACEPARENT})
        assert answer.status_code == 200
        assert (await http.get("/nowhere")).status_code == 404
    server = spans.one("POST /v1/chat/completions")
    assert server.kind == SpanKind.SERVER and server.parent is not None and server.context is not None
    assert (server.context.trace_id, server.parent.span_id) == (TRACE_ID, CLIENT_SPAN)
    attrs = dict(server.attributes or {})
    assert attrs["http.route"] == "/v1/chat/completions"
    assert (attrs["http.request.method"], attrs["http.response.status_code"]) == ("POST", 200)
    llm_request = spans.one("llm_request")
    assert llm_request.parent is not None and llm_request.parent.span_id == server.context.span_id
    # No route matched: a root span named by the method alone, with the status.
    unrouted = spans.one("GET")
    assert unrouted.parent is None and dict(unrouted.attributes or {})["http.response.status_code"] == 404


async def test_a_traceparent_in_vllm_inference_metadata_is_the_parent(
    tiny_model_dir: Path, spans: Spans
) -> None:
    mock = tiny_mock(tiny_model_dir)
    server = await start_server(
        ServerConfig(port=0, grpc_port=0), LlmSource.provided(TracedLlm(mock, spans.tracer))
    )
    try:
        async with public_client(server.grpc_target) as client:
            request = inference_pb.GenerateRequest(
                text="hi", stopping=inference_pb.StoppingCriteria(max_new_tokens=2)
            )
            await client.inference.Generate(request, metadata=(("traceparent", TRACEPARENT),), timeout=30)
    finally:
        await server.stop()
        await mock.shutdown()
    span = spans.one("llm_request")
    assert span.context is not None and span.parent is not None
    assert (span.context.trace_id, span.parent.span_id) == (TRACE_ID, CLIENT_SPAN)


@pytest.mark.parametrize(
    "endpoint",
    [
        "",
        " grpc://h:4317",
        "ftp://collector:4317",
        "grpcs://collector:4317",
        "http://",
        "grpc://h:port",
        "collector",
        "h:0",
    ],
)
def test_a_bad_endpoint_is_refused_when_the_server_is_made(endpoint: str, tiny_info: LlmInfo) -> None:
    with pytest.raises(TracingConfigError, match="otlp-traces-endpoint"):
        Server(ServerConfig(otlp_traces_endpoint=endpoint), LlmSource.provided(MockLlm(info=tiny_info)))


@pytest.mark.parametrize("endpoint", ["grpc://collector:4317", "http://127.0.0.1:4317", "collector:4317"])
def test_good_endpoints_pass(endpoint: str) -> None:
    check_endpoint(endpoint)


def test_an_unknown_protocol_is_refused_with_vllms_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    with pytest.raises(TracingConfigError, match="Unsupported OTLP protocol 'http/json' is configured"):
        check_endpoint("grpc://collector:4317")
