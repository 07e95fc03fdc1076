"""OpenTelemetry tracing (`--otlp-traces-endpoint`): the exporter set-up and `TracedLlm`.

`Tracing.start(endpoint)` builds a tracer provider exporting in batches over OTLP (gRPC, or HTTP with
`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf`, as vLLM) and makes it the process's; the SDK's own
`OTEL_*` variables apply (service name and resource attributes, sampler, batch delays, exporter headers,
timeout, compression, certificates). Like vLLM it exports the endpoint as
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, so an engine core the server starts traces its loading too.

`TracedLlm(llm, tracer)` wraps the served Llm: each `generate` is one `llm_request` span (vLLM's name,
kind and `gen_ai.*` attributes, `vllm/v1/engine/output_processor.py` `do_tracing`) whose parent is the
request's `trace_headers` (W3C `traceparent` / `tracestate`) when it has them, else the current span
(the HTTP request's). The span's own context replaces those headers before the request goes on, so a
router's `RemoteLlm` hands its worker the router's span as the parent, and a worker its engine.

This module imports OpenTelemetry; the server imports it only when tracing is on.
"""

from __future__ import annotations

import asyncio
import os
import time
import traceback
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import msgspec

from vllm_llm import GenerateStream, Llm
from vllm_llm.delegating import DelegatingLlm
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "SERVICE_NAME",
    "TRACE_HEADERS",
    "SpanAttributes",
    "TracedLlm",
    "Tracing",
    "TracingConfigError",
    "check_endpoint",
    "extract_context",
    "mark_failed",
]

#: `service.name` unless `OTEL_SERVICE_NAME` / `OTEL_RESOURCE_ATTRIBUTES` name one (vLLM sets none).
SERVICE_NAME = "vllm-frontend"
#: The instrumentation scope of our spans (vLLM's resource attribute `vllm.instrumenting_module_name`).
INSTRUMENTATION = "vllm_server"
#: The W3C trace-context headers, carried in `GenerateRequest.trace_headers` (vLLM's TRACE_HEADERS).
TRACE_HEADERS = ("traceparent", "tracestate")
#: vLLM's span name for a request.
LLM_REQUEST_SPAN = "llm_request"
#: OTLP protocols vLLM exports with (`OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`).
_PROTOCOLS = ("grpc", "http/protobuf")


class SpanAttributes:
    """vLLM's span attribute names (`vllm/tracing/utils.py`)."""

    GEN_AI_USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
    GEN_AI_USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
    GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
    GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
    GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
    GEN_AI_REQUEST_ID = "gen_ai.request.id"
    GEN_AI_REQUEST_N = "gen_ai.request.n"
    GEN_AI_LATENCY_TIME_IN_QUEUE = "gen_ai.latency.time_in_queue"
    GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN = "gen_ai.latency.time_to_first_token"
    GEN_AI_LATENCY_E2E = "gen_ai.latency.e2e"
    GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL = "gen_ai.latency.time_in_model_prefill"
    GEN_AI_LATENCY_TIME_IN_MODEL_DECODE = "gen_ai.latency.time_in_model_decode"
    GEN_AI_LATENCY_TIME_IN_MODEL_INFERENCE = "gen_ai.latency.time_in_model_inference"


class TracingConfigError(ValueError):
    """Tracing cannot start: a bad endpoint or protocol, or OpenTelemetry is not installed."""


# ---- the exporter -------------------------------------------------------------------------------------


def check_endpoint(endpoint: str) -> None:
    """Refuse an endpoint the OTLP exporter cannot send to (checked at start-up, before serving)."""
    protocol = _protocol()
    if protocol not in _PROTOCOLS:
        raise TracingConfigError(f"Unsupported OTLP protocol '{protocol}' is configured")
    if not endpoint.strip() or endpoint != endpoint.strip():
        raise TracingConfigError(
            f"--otlp-traces-endpoint {endpoint!r}: expected a URL such as grpc://HOST:PORT"
        )
    parts = urlsplit(endpoint)
    if "://" not in endpoint:
        if protocol != "grpc":
            raise TracingConfigError(
                f"--otlp-traces-endpoint {endpoint!r}: OTLP over HTTP needs an http:// or https:// URL"
            )
        _check_port(endpoint, endpoint.rpartition(":")[2] if ":" in endpoint else None)
        return
    schemes = ("http", "https", "grpc") if protocol == "grpc" else ("http", "https")
    if parts.scheme not in schemes or not parts.hostname:
        expected = " or ".join(f"{scheme}://HOST:PORT" for scheme in schemes)
        raise TracingConfigError(f"--otlp-traces-endpoint {endpoint!r}: expected {expected}")
    try:
        parts.port  # noqa: B018 - parsing the port is the check
    except ValueError:
        raise TracingConfigError(f"--otlp-traces-endpoint {endpoint!r}: the port is not a number") from None


def _check_port(endpoint: str, port: str | None) -> None:
    """A bare gRPC target (`HOST:PORT`): the port must be a number in range."""
    if port is None or not port.isdigit() or not 0 < int(port) < 65536:
        raise TracingConfigError(
            f"--otlp-traces-endpoint {endpoint!r}: expected HOST:PORT or a URL such as grpc://HOST:PORT"
        )


def _protocol() -> str:
    return os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc").strip()


class Tracing:
    """The process's tracer provider, exporting to an OTLP endpoint; `shutdown` flushes it."""

    def __init__(self, provider: TracerProvider) -> None:
        self.provider = provider
        self.tracer: Tracer = provider.get_tracer(INSTRUMENTATION)

    @classmethod
    def start(cls, endpoint: str) -> Tracing:
        """Export spans to `endpoint` (checked first); the provider becomes the process's."""
        check_endpoint(endpoint)
        try:
            from opentelemetry import trace
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
        except ImportError:
            raise TracingConfigError(
                "OpenTelemetry is not available. Unable to configure 'otlp_traces_endpoint'. Ensure "
                f"OpenTelemetry packages are installed. Original error:\n{traceback.format_exc()}"
            ) from None
        # As vLLM: child processes (the engine core) find the endpoint here and trace their own work.
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = endpoint
        resource = Resource.create(
            {"vllm.instrumenting_module_name": INSTRUMENTATION, "vllm.process_id": str(os.getpid())}
        )
        if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
            resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(_exporter(endpoint)))
        trace.set_tracer_provider(provider)  # vLLM's own instrumented start-up steps use it
        return cls(provider)

    def traced(self, llm: Llm) -> TracedLlm:
        """`llm` with a span per request."""
        return TracedLlm(llm, self.tracer)

    async def shutdown(self) -> None:
        """Export what is left and stop (off the event loop: the exporter blocks)."""
        await asyncio.to_thread(self.provider.shutdown)


def _exporter(endpoint: str) -> Any:
    """vLLM's exporter choice: plaintext gRPC unless https:// (or the SDK's INSECURE variables say)."""
    if _protocol() == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter(endpoint=endpoint)
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    insecure_set = any(
        name in os.environ for name in ("OTEL_EXPORTER_OTLP_TRACES_INSECURE", "OTEL_EXPORTER_OTLP_INSECURE")
    )
    return OTLPSpanExporter(endpoint=endpoint, insecure=None if insecure_set else True)


# ---- the traced Llm -----------------------------------------------------------------------------------


def mark_failed(span: Span, description: str | None = None) -> None:
    """Give `span` the error status (a span's outcome; the error table owns response statuses)."""
    from opentelemetry.trace import Status
    from opentelemetry.trace import StatusCode as SpanOutcome

    span.set_status(Status(SpanOutcome.ERROR, description))


def extract_context(headers: Mapping[str, str] | None) -> Context | None:
    """The trace context W3C headers carry; None when they carry none (then the current one applies)."""
    if not headers or not any(h in headers for h in TRACE_HEADERS):
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract(dict(headers))


def _inject(span: Span, headers: Mapping[str, str] | None) -> dict[str, str]:
    """`headers` with the W3C headers naming `span` as the parent."""
    from opentelemetry.trace import set_span_in_context
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier = {k: v for k, v in (headers or {}).items() if k not in TRACE_HEADERS}
    TraceContextTextMapPropagator().inject(carrier, context=set_span_in_context(span))
    return carrier


class TracedLlm(DelegatingLlm):
    """The served Llm with an `llm_request` span per request (see the module docstring)."""

    def __init__(self, inner: Llm, tracer: Tracer) -> None:
        super().__init__(inner)
        self.tracer = tracer

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Start the request's span, name it the parent in `trace_headers`, and generate."""
        from opentelemetry.trace import SpanKind

        span = self.tracer.start_span(
            LLM_REQUEST_SPAN,
            context=extract_context(request.trace_headers),
            kind=SpanKind.SERVER,
            attributes=_request_attributes(request),
        )
        record = _SpanRecord(span, len(request.prompt_token_ids))
        traced = msgspec.structs.replace(request, trace_headers=_inject(span, request.trace_headers))
        try:
            inner = await self.inner.generate(traced)
        except BaseException as exc:
            record.fail(exc)
            raise

        async def close() -> None:
            record.close_early()
            await inner.aclose()

        return GenerateStream(inner.request_id, _TracedOutputs(inner, record), close)


def _request_attributes(request: GenerateRequest) -> dict[str, Any]:
    """vLLM's `gen_ai.request.*`: the id, and the sampling parameters that are set (truthy, as vLLM)."""
    params = request.sampling_params
    attributes: dict[str, Any] = {
        SpanAttributes.GEN_AI_REQUEST_ID: request.request_id,
        # One sequence per Llm request: `n` fans out above this layer, as vLLM's child requests.
        SpanAttributes.GEN_AI_REQUEST_N: 1,
    }
    if params.top_p:
        attributes[SpanAttributes.GEN_AI_REQUEST_TOP_P] = params.top_p
    if params.max_tokens:
        attributes[SpanAttributes.GEN_AI_REQUEST_MAX_TOKENS] = params.max_tokens
    if params.temperature:
        attributes[SpanAttributes.GEN_AI_REQUEST_TEMPERATURE] = params.temperature
    return attributes


class _TracedOutputs:
    """The inner stream's outputs, observed by the span record on their way."""

    __slots__ = ("_inner", "_record")

    def __init__(self, inner: GenerateStream, record: _SpanRecord) -> None:
        self._inner = inner
        self._record = record

    def __aiter__(self) -> _TracedOutputs:
        return self

    async def __anext__(self) -> GenerateOutput:
        try:
            out = await self._inner.__anext__()
        except asyncio.CancelledError:
            raise  # the reader was cancelled: closing the stream ends the span
        except StopAsyncIteration:
            self._record.end_error("the stream ended without a final output")
            raise
        except BaseException as exc:
            self._record.fail(exc)
            raise
        self._record.observe(out)
        return out


class _SpanRecord:
    """One request's span: latencies measured here, usage counted from its outputs, ended once."""

    __slots__ = ("_completion_tokens", "_ended", "_first_token", "_prompt_tokens", "_started", "span")

    def __init__(self, span: Span, prompt_tokens: int) -> None:
        self.span = span
        self._started = time.monotonic()
        self._first_token: float | None = None
        self._prompt_tokens = prompt_tokens
        self._completion_tokens = 0
        self._ended = False

    def observe(self, out: GenerateOutput) -> None:
        """Count `out`'s tokens; end the span on the final output (an error status if it was aborted)."""
        if out.prompt_info is not None:
            self._prompt_tokens = out.prompt_info.num_prompt_tokens  # prompt embeddings have no ids
        if out.token_ids:
            if self._first_token is None:
                self._first_token = time.monotonic()
            self._completion_tokens += len(out.token_ids)
        if out.finish_reason is None:
            return
        self._measure(out)
        if out.finish_reason in (FinishReason.ABORT, FinishReason.ERROR):
            self.end_error(f"finish_reason={out.finish_reason.name.lower()}")
        else:
            self._end()

    def close_early(self) -> None:
        """The caller closed the stream before its final output, which aborts the request.

        Not an error status: the text layer closes a stream whose stop string matched, as vLLM's
        detokenizer finishes such a request with `stop`; a client that went away looks the same here.
        """
        if self._ended:
            return
        self._measure(None)
        self.span.add_event("aborted", {"reason": "the stream was closed before its final output"})
        self._end()

    def fail(self, exc: BaseException) -> None:
        """End the span with `exc` recorded and an error status."""
        if self._ended:
            return
        self._measure(None)
        if isinstance(exc, Exception):
            self.span.record_exception(exc)
        self.end_error(f"{type(exc).__name__}: {exc}")

    def end_error(self, description: str) -> None:
        """End the span with an error status (once)."""
        if self._ended:
            return
        mark_failed(self.span, description)
        self._end()

    def _measure(self, final: GenerateOutput | None) -> None:
        """vLLM's latency and usage attributes; the engine's phases from the final output's timings."""
        attributes: dict[str, Any] = {
            SpanAttributes.GEN_AI_LATENCY_E2E: time.monotonic() - self._started,
            SpanAttributes.GEN_AI_USAGE_PROMPT_TOKENS: self._prompt_tokens,
            SpanAttributes.GEN_AI_USAGE_COMPLETION_TOKENS: self._completion_tokens,
        }
        if self._first_token is not None:
            attributes[SpanAttributes.GEN_AI_LATENCY_TIME_TO_FIRST_TOKEN] = self._first_token - self._started
        timings = final.timings if final is not None else None
        if timings is not None:  # the engine's own clock, on the final output of an engine that logs stats
            attributes[SpanAttributes.GEN_AI_LATENCY_TIME_IN_QUEUE] = timings.queued_time
            attributes[SpanAttributes.GEN_AI_LATENCY_TIME_IN_MODEL_PREFILL] = timings.prefill_time
            attributes[SpanAttributes.GEN_AI_LATENCY_TIME_IN_MODEL_DECODE] = timings.decode_time
            attributes[SpanAttributes.GEN_AI_LATENCY_TIME_IN_MODEL_INFERENCE] = timings.inference_time
        self.span.set_attributes(attributes)

    def _end(self) -> None:
        if not self._ended:
            self._ended = True
            self.span.end()
