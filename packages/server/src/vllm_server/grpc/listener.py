"""`GrpcFrontend`: the server's gRPC listener, `vllm.internal.Llm` plus `grpc.health.v1` over one `Llm`.

Lifecycle: `start(host, port)` binds and serves; `begin_drain()` flips every health status to
NOT_SERVING for good and refuses new Generate calls with UNAVAILABLE (so balancing clients go
elsewhere); `stop(grace)` waits up to `grace` for the calls in flight to end while it goes on refusing
new ones itself, and only then stops gRPC's server, which cancels what is left (aborting their requests).
Stopping gRPC's server at once would answer a call that arrives meanwhile CANCELLED, which a client
does not take as "go elsewhere". With `tls` the listener is TLS, and mTLS (client certificates required) when
`tls.ca_certs` is set. With `api_key` every call but health must carry `authorization: Bearer <key>`
(or `x-api-key: <key>`): Kubernetes probes carry no key.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from vllm_llm import Llm
from vllm_llm.watch import WatchSender
from vllm_llm.wire import SERVICE_NAME, LlmInfo
from vllm_server.errors import Unauthenticated
from vllm_server.grpc.health import HEALTH_SERVICE, LlmHealth
from vllm_server.grpc.llm_service import LlmService
from vllm_server.grpc.status import abort_call
from vllm_server.metrics import Metrics
from vllm_server.tls import TlsConfig

ServiceAdder = Callable[[grpc.aio.Server], None]

#: Clients may ping this often (RemoteLlm's keepalive defaults stay above it).
MIN_CLIENT_PING_INTERVAL_MS = 5_000

#: Calls that may wait for the Python server to pick them up. gRPC's default (1,000, hard limit 3,000)
#: CANCELs the rest of a burst, e.g. a router opening 1,500 streams at once; a cancelled call is not
#: retried on another worker and reaches the client as an internal error.
MAX_PENDING_CALLS = 10_000


class GrpcFrontend:
    """Builds, starts, drains and stops the grpc.aio server of one `Llm` (it never shuts the Llm down)."""

    def __init__(
        self,
        llm: Llm,
        *,
        api_key: str | None = None,
        tls: TlsConfig | None = None,
        max_message_bytes: int = 64 << 20,
        extra_services: Sequence[ServiceAdder] = (),
        health_services: Sequence[str] = (),
        info: Callable[[], LlmInfo] | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self._service = LlmService(llm, info, metrics, max_message_bytes=max_message_bytes)
        self._health = LlmHealth(llm.subscribe_readiness(), (SERVICE_NAME, *health_services))
        self._api_key = api_key
        self._calls = CallCounter()
        self._tls = tls
        self._max_message_bytes = max_message_bytes
        self._extra_services = tuple(extra_services)
        self._server: grpc.aio.Server | None = None
        self._port: int | None = None

    @property
    def port(self) -> int | None:
        """The bound port once started."""
        return self._port

    @property
    def health_services(self) -> tuple[str, ...]:
        """The names with a health status (`""`, `vllm.internal.Llm` and the extra ones)."""
        return self._health.services

    async def start(self, host: str, port: int) -> int:
        """Bind `host:port` (0: an ephemeral port), start serving, and return the bound port."""
        if self._server is not None:
            raise RuntimeError("the gRPC frontend was already started")
        interceptors: list[grpc.aio.ServerInterceptor] = [self._calls]
        if self._api_key is not None:
            interceptors.append(ApiKeyInterceptor(self._api_key))
        server = grpc.aio.server(interceptors=interceptors, options=self._options())
        self._service.register(server)
        self._health.register(server)
        for add in self._extra_services:
            add(server)
        address = f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"
        if self._tls is None:
            bound = server.add_insecure_port(address)
        else:
            bound = server.add_secure_port(address, _server_credentials(self._tls))
        await self._health.start()
        await server.start()
        self._server, self._port = server, bound
        return int(bound)

    async def begin_drain(self) -> None:
        """Health NOT_SERVING for every service, for good; new Generate calls get UNAVAILABLE."""
        self._service.begin_drain()
        await self._health.begin_drain()

    @property
    def calls_in_progress(self) -> int:
        """Calls in progress now, health's left out."""
        return self._calls.in_progress

    async def wait_idle(self) -> None:
        """Wait until no call is in progress (health's left out)."""
        await self._calls.wait_idle()

    async def stop(self, grace: float) -> None:
        """Drain, let calls in flight finish within `grace` seconds, then cancel them (aborting them)."""
        server, self._server = self._server, None
        if server is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        await self.begin_drain()
        # gRPC's server stays up, refusing new calls with UNAVAILABLE, while the calls in flight end.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.wait_idle(), grace)
        # Health Watch streams never end by themselves; they would hold `stop` for the whole grace.
        await self._health.end_watches(within=min(max(deadline - loop.time(), 0.0), 1.0))
        await server.stop(max(deadline - loop.time(), 0.0))
        await self._health.close()

    def _options(self) -> list[tuple[str, Any]]:
        return [
            ("grpc.so_reuseport", 0),
            ("grpc.max_receive_message_length", self._max_message_bytes),
            ("grpc.max_send_message_length", self._max_message_bytes),
            # Let clients detect a dead peer with keepalive pings, even between calls.
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", MIN_CLIENT_PING_INTERVAL_MS),
            ("grpc.http2.min_ping_interval_without_data_ms", MIN_CLIENT_PING_INTERVAL_MS),
            ("grpc.server.max_pending_requests", MAX_PENDING_CALLS),
            ("grpc.server.max_pending_requests_hard_limit", 2 * MAX_PENDING_CALLS),
        ]


def _server_credentials(tls: TlsConfig) -> Any:
    cert, key, ca = tls.read()
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
    )


class CallCounter(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpcio has no type hints
    """Counts the calls in progress, health's left out (a Watch lasts as long as its client): what a
    drain waits for before it stops gRPC's server."""

    def __init__(self) -> None:
        self._count = WatchSender(0)

    @property
    def in_progress(self) -> int:
        """Calls in progress now."""
        return self._count.value

    async def wait_idle(self) -> None:
        """Wait until no call is in progress."""
        await self._count.subscribe().wait_for(lambda n: n == 0)

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]], details: Any) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith(f"/{HEALTH_SERVICE}/"):
            return handler
        return _counted(handler, self._count)


def _counted(handler: Any, count: WatchSender[int]) -> Any:
    """`handler` with its behaviour counted in `count` while it runs (a coroutine or an async generator)."""
    if handler.request_streaming and handler.response_streaming:
        behaviour, make = handler.stream_stream, grpc.stream_stream_rpc_method_handler
    elif handler.request_streaming:
        behaviour, make = handler.stream_unary, grpc.stream_unary_rpc_method_handler
    elif handler.response_streaming:
        behaviour, make = handler.unary_stream, grpc.unary_stream_rpc_method_handler
    else:
        behaviour, make = handler.unary_unary, grpc.unary_unary_rpc_method_handler

    if inspect.isasyncgenfunction(behaviour):

        async def counted_stream(request: Any, context: Any) -> Any:
            count.send(count.value + 1)
            try:
                async for response in behaviour(request, context):
                    yield response
            finally:
                count.send(count.value - 1)

        counted: Any = counted_stream
    elif inspect.iscoroutinefunction(behaviour):

        async def counted_call(request: Any, context: Any) -> Any:
            count.send(count.value + 1)
            try:
                return await behaviour(request, context)
            finally:
                count.send(count.value - 1)

        counted = counted_call
    elif not inspect.iscoroutinefunction(behaviour):
        return handler  # a synchronous handler (none of ours): run as it is, uncounted
    return make(
        counted,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


class ApiKeyInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpcio has no type hints
    """Rejects calls without the API key (UNAUTHENTICATED); health stays open for probes."""

    def __init__(self, api_key: str) -> None:
        self._accepted = (f"Bearer {api_key}".encode(), api_key.encode())

    async def intercept_service(self, continuation: Callable[[Any], Awaitable[Any]], details: Any) -> Any:
        handler = await continuation(details)
        if handler is None or details.method.startswith(f"/{HEALTH_SERVICE}/") or self._authorized(details):
            return handler
        return _rejecting(handler, details.method)

    def _authorized(self, details: Any) -> bool:
        bearer, plain = self._accepted
        for key, value in details.invocation_metadata or ():
            given = value.encode() if isinstance(value, str) else value
            if key == "authorization" and hmac.compare_digest(given, bearer):
                return True
            if key == "x-api-key" and hmac.compare_digest(given, plain):
                return True
        return False


def _rejecting(handler: Any, method: str) -> Any:
    """A handler of the same kind as `handler` that ends the call with `Unauthenticated`."""

    async def deny(request: Any, context: Any) -> None:
        await abort_call(context, Unauthenticated("a valid API key is required"), service=method)

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(deny)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(deny)
    return grpc.unary_unary_rpc_method_handler(deny)
