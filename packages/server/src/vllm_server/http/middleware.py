"""Plain ASGI middleware: API-key auth, body size limit, server load and HTTP metrics, X-Request-Id."""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Awaitable

from starlette._utils import get_route_path
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from vllm_server.errors import PayloadTooLarge, RequestError, Unauthenticated, error_body, map_error
from vllm_server.http.openai.request_id import REQUEST_ID_KEY
from vllm_server.load import LoadCounter
from vllm_server.metrics import Metrics

#: Routes that stay open without the API key: probes and scrapers carry none.
OPEN_PATHS = frozenset({"/health", "/ready", "/metrics", "/version", "/load", "/ping"})
#: Routes whose refusals take Anthropic's error shape.
ANTHROPIC_PATH_PREFIX = "/v1/messages"


async def send_error(send: Send, exc: RequestError, *, anthropic: bool = False) -> None:
    """Send an OpenAI-style (or Anthropic-style) error response from middleware."""
    mapping = map_error(exc)
    if anthropic:
        # Imported here: the Anthropic package's routes import this module (a cycle at import time).
        from vllm_server.http.anthropic.error import anthropic_error_body

        body = json.dumps(anthropic_error_body(mapping)).encode()
    else:
        body = json.dumps(error_body(mapping)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": int(mapping.http_status),
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class ApiKeyMiddleware:
    """Requires the API key on every route but the open ones: `Authorization: Bearer <key>` (the scheme in
    any case, as vLLM's AuthenticationMiddleware), or `x-api-key: <key>`, the header Anthropic's clients
    send. A refusal on the Anthropic routes (`/v1/messages*`) takes Anthropic's error shape."""

    def __init__(self, app: ASGIApp, *, api_key: str) -> None:
        self.app = app
        self._expected = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] == "OPTIONS":
            await self.app(scope, receive, send)
            return
        path = get_route_path(scope)  # without a --root-path prefix
        if path in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        if not self._authorized(dict(scope["headers"])):
            refusal = Unauthenticated("invalid or missing API key")
            await send_error(send, refusal, anthropic=path.startswith(ANTHROPIC_PATH_PREFIX))
            return
        await self.app(scope, receive, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        scheme, _, given = headers.get(b"authorization", b"").partition(b" ")
        bearer = hmac.compare_digest(given, self._expected) and scheme.lower() == b"bearer"
        api_key = hmac.compare_digest(headers.get(b"x-api-key", b""), self._expected)
        return bearer or api_key


class BodyLimitMiddleware:
    """Rejects request bodies larger than `max_bytes` with 413, by declared length or as they stream."""

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        too_large = PayloadTooLarge(f"request body exceeds {self.max_bytes} bytes")
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await send_error(send, too_large)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise too_large
            return message

        await self.app(scope, limited, send)


class LoadMiddleware:
    """Counts requests in progress (all for a drain, those to `counted` (method, path) pairs for `/load`)
    and HTTP requests by route and status (`/metrics`)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        load: LoadCounter,
        counted: frozenset[tuple[str, str]] = frozenset(),
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.load = load
        self.counted = counted

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        def track(message: Message) -> Awaitable[None]:
            # A plain function handing back `send`'s awaitable: no coroutine of its own per SSE chunk.
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            return send(message)

        inference = (scope["method"], get_route_path(scope)) in self.counted
        self.load.add(1, inference=inference)
        try:
            await self.app(scope, receive, track)
        finally:
            self.load.add(-1, inference=inference)
            route = scope.get("route")
            handler = getattr(route, "path", "unmatched")
            self.metrics.http_requests.labels(handler, scope["method"], str(status)).inc()


class RequestIdMiddleware:
    """Every response carries `X-Request-Id`: the client's, else the id the route used, else a new one.

    vLLM's `--enable-request-id-headers` echoes the client's header or a fresh uuid. Ours is always on
    and, without a client header, names the id the request ran under (the body's `request_id` or the
    one generated for it), so the header finds the request in the request log and in traces.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), None)

        def with_id(message: Message) -> Awaitable[None]:
            if message["type"] == "http.response.start":
                request_id = given
                if request_id is None:
                    used = scope.get("state", {}).get(REQUEST_ID_KEY)
                    request_id = used.encode() if used else secrets.token_hex(16).encode()
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id)]
            return send(message)

        await self.app(scope, receive, with_id)
