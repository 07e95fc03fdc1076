"""`TracingMiddleware`: one OpenTelemetry server span per HTTP request (installed when tracing is on).

The span's parent is the W3C `traceparent` / `tracestate` the client sent (as vLLM reads them into a
request's trace headers), else it starts a trace. It is current while the route runs, so the served
Llm's `llm_request` span is its child. Attributes follow OpenTelemetry's HTTP server conventions; a
5xx or an exception is an error status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vllm_server.tracing import TRACE_HEADERS, extract_context, mark_failed

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = ["TracingMiddleware"]


class TracingMiddleware:
    """A server span around each HTTP request, child of the client's W3C trace context."""

    def __init__(self, app: ASGIApp, *, tracer: Tracer) -> None:
        self.app = app
        self.tracer = tracer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry.trace import SpanKind, use_span

        headers = _headers(scope)
        span = self.tracer.start_span(
            scope["method"],
            context=extract_context(headers),
            kind=SpanKind.SERVER,
            attributes=_request_attributes(scope, headers),
        )
        status: int | None = None

        def observe(message: Message) -> Any:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            return send(message)

        with use_span(span, end_on_exit=True, record_exception=True, set_status_on_exception=True):
            try:
                await self.app(scope, receive, observe)
            finally:
                _finish(span, scope, status)


def _headers(scope: Scope) -> dict[str, str]:
    """The request's trace-context headers and user agent (ASGI gives lower-case names)."""
    wanted = {*TRACE_HEADERS, "user-agent"}
    return {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope["headers"]
        if name.decode("latin-1") in wanted
    }


def _request_attributes(scope: Scope, headers: dict[str, str]) -> dict[str, Any]:
    attributes: dict[str, Any] = {
        "http.request.method": scope["method"],
        "url.scheme": scope.get("scheme", "http"),
        "url.path": scope["path"],
        "network.protocol.version": scope.get("http_version", "1.1"),
    }
    if query := scope.get("query_string", b""):
        attributes["url.query"] = query.decode("latin-1")
    if server := scope.get("server"):
        attributes["server.address"], attributes["server.port"] = server[0], server[1]
    if client := scope.get("client"):
        attributes["client.address"], attributes["client.port"] = client[0], client[1]
    if agent := headers.get("user-agent"):
        attributes["user_agent.original"] = agent
    return attributes


def _finish(span: Span, scope: Scope, status: int | None) -> None:
    """Name the span by its route template (known once routed) and record the response status."""
    route = getattr(scope.get("route"), "path", None)
    if route is not None:
        span.update_name(f"{scope['method']} {route}")
        span.set_attribute("http.route", route)
    if status is not None:
        span.set_attribute("http.response.status_code", status)
        if status >= 500:
            mark_failed(span)
