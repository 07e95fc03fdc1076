"""An OTLP gRPC trace collector in the test's process (`TraceService/Export`): what `--otlp-traces-endpoint`
exports to, every span kept as received (ids in hex, attributes as plain values)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2 as pb
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue


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
    """An OTLP gRPC trace collector (`TraceService/Export`) on loopback keeping every span it receives."""

    def __init__(self, port: int = 0) -> None:
        self.spans: list[ReceivedSpan] = []
        self._changed = asyncio.Condition()
        self._server = grpc.aio.server()
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self, self._server)  # type: ignore[no-untyped-call]
        self.port = self._server.add_insecure_port(f"127.0.0.1:{port}")

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
