"""The servicer of `vllm.internal.Llm` over any `Llm`: Generate, Info and Abort.

Errors end the call through the one abort helper (`vllm_server.grpc.status.abort_call`); a
validation error of the Llm arrives as the call's status before any output. Requests are decoded by
typed msgspec decoders built from the method table; bytes that do not decode as the method's request
type (garbage, truncated or mistyped MessagePack, nesting deeper than the decoder's recursion limit, an
extension type other than the tensor's) end the call with INVALID_ARGUMENT before any handler runs.

A cancelled call (client cancel, disconnect, deadline, or the server stopping after its grace) closes
the Llm stream in `finally`, which aborts the request.

A request (Generate or GenerateMux) that names a LoRA adapter must name one the server serves, by name and
id as its `Info` lists them, else it ends with NOT_FOUND (`RemoteNotFound`, a 404 at a router) before
it reaches the Llm. A router resolves adapters from a worker's Info read earlier: an adapter unloaded
since, one another worker loaded, or the same name under another id. Passed on, a vLLM engine would load
the adapter from the request's path on its own (served after its unload, and left in the engine under
an id the worker hands the next adapter it loads, which would then run with these weights).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
import msgspec

from vllm_llm import GenerateStream, InvalidRequest, Llm, Unavailable
from vllm_llm.delegating import DelegatingLlm
from vllm_llm.wire import (
    METHODS,
    SERVICE_NAME,
    AbortRequest,
    AbortResponse,
    GenerateRequest,
    InfoRequest,
    LlmInfo,
    MethodSpec,
    MuxRequest,
    decoder,
    encode,
)
from vllm_remote_llm.protocol import ACCEPTED_METADATA
from vllm_server.errors import NotFound
from vllm_server.grpc.guarded import Undecodable, guarded_deserializer, method_handler
from vllm_server.grpc.mux import MuxSession
from vllm_server.grpc.status import ServicerContext, abort_call
from vllm_server.metrics import Metrics, ServedRequest

logger = logging.getLogger(__name__)


class LlmService:
    """Serves `vllm.internal.Llm` from an `Llm`; register it with `register(server)`."""

    _llm: Llm
    _draining: bool

    def __init__(
        self,
        llm: Llm,
        info: Callable[[], LlmInfo] | None = None,
        metrics: Metrics | None = None,
        *,
        max_message_bytes: int = 64 << 20,
    ) -> None:
        self._info = info or llm.info
        self._llm = _ServedAdaptersOnly(llm, self._info)
        #: The server's send limit: a GenerateMux message of many outputs is split to stay under it.
        self._max_message_bytes = max_message_bytes
        #: The server's metrics: a routed request counts on the worker that ran it.
        self._metrics = metrics
        self._draining = False
        self._mux_sessions: set[MuxSession] = set()

    def register(self, server: grpc.aio.Server) -> None:
        """Add the service to `server` (from the generated method table, with guarded request decoding)."""
        # Generate is a coroutine that writes with `context.write` (see its docstring), not the async
        # generator the generated protocol names; grpc.aio accepts both styles for a streaming handler.
        handlers = {m.name: _method_handler(m, getattr(self, m.name)) for m in METHODS}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
        server.add_registered_method_handlers(SERVICE_NAME, handlers)

    def begin_drain(self) -> None:
        """Refuse new Generate calls (and GenerateMux requests) with UNAVAILABLE from now on; calls in
        flight go on, and a GenerateMux call ends once its running requests ended."""
        self._draining = True
        for session in list(self._mux_sessions):
            session.drain()

    async def Generate(self, request: GenerateRequest, context: ServicerContext) -> None:
        """Stream the Llm's delta outputs; cancelling the call aborts the request.

        A cancellation of the call (client cancel, disconnect, deadline, the server's grace running out)
        lands in this handler; `finally` closes the Llm stream, which aborts the request.
        """
        if self._draining:
            await abort_call(
                context,
                Unavailable("the server is draining; send the request elsewhere"),
                service=SERVICE_NAME,
            )
        try:
            stream = await self._llm.generate(request)
        except Exception as exc:
            await abort_call(context, exc, service=SERVICE_NAME)
        if self._metrics is not None:
            stream = self._metrics.tap(stream, request)
        served = ServedRequest(self._metrics, request)
        try:
            await context.send_initial_metadata(ACCEPTED_METADATA)
            async for out in stream:
                served.output(out)
                await context.write(out)
        except Exception as exc:
            await abort_call(context, exc, service=SERVICE_NAME)
        finally:
            await stream.aclose()
            served.finish()

    async def GenerateMux(
        self, requests: AsyncIterator[MuxRequest | Undecodable], context: ServicerContext
    ) -> None:
        """Many requests on one stream (`vllm_server.grpc.mux`)."""
        session = MuxSession(
            self._llm,
            metrics=self._metrics,
            draining=lambda: self._draining,
            service=SERVICE_NAME,
            max_message_bytes=self._max_message_bytes,
        )
        self._mux_sessions.add(session)
        peer = context.peer()
        logger.info("a GenerateMux stream from %s opened", peer)
        try:
            await session.serve(requests, context)
        finally:
            self._mux_sessions.discard(session)
            logger.info("the GenerateMux stream from %s closed after %d requests", peer, session.started)

    async def Info(self, request: InfoRequest, context: ServicerContext) -> LlmInfo:
        """The Llm's `LlmInfo`, with what the server adds (the LoRA adapters it serves)."""
        try:
            return self._info()
        except Exception as exc:
            await abort_call(context, exc, service=SERVICE_NAME)

    async def Abort(self, request: AbortRequest, context: ServicerContext) -> AbortResponse:
        """Abort by external id; an empty list is rejected."""
        if not request.request_ids:
            await abort_call(
                context,
                InvalidRequest(
                    "request_ids must not be empty: aborting every request of a shared server "
                    "is not one caller's to do",
                    param="request_ids",
                ),
                service=SERVICE_NAME,
            )
        try:
            await self._llm.abort(request.request_ids)
        except Exception as exc:
            await abort_call(context, exc, service=SERVICE_NAME)
        return AbortResponse()


def _encoded(message: Any) -> bytes:
    """A GenerateMux response: bytes its session encoded already (to measure them), else a Struct."""
    return message if message.__class__ is bytes else encode(message)


def _request_decoder(t: type[Any]) -> Callable[[bytes], Any]:
    """A deserializer that never raises: a failure becomes an `Undecodable` the handler rejects.

    The wire's decoder refuses extension types other than the tensor's (no pickle here); its
    DecodeError covers ValidationError and ForeignExtension.
    """
    return guarded_deserializer(decoder(t).decode, t.__name__, (msgspec.DecodeError,))


def _method_handler(
    method: MethodSpec[Any, Any], behaviour: Callable[[Any, ServicerContext], Awaitable[Any]]
) -> grpc.RpcMethodHandler:
    """The grpcio handler of one method of the table: decode, reject what did not decode, serve."""
    return method_handler(
        behaviour,
        streaming="bidi" if method.streaming == "bidi" else method.streaming == "server",
        deserializer=_request_decoder(method.request_type),
        serializer=_encoded if method.streaming == "bidi" else encode,
        service=SERVICE_NAME,
    )


class _ServedAdaptersOnly(DelegatingLlm):
    """Forwards to `inner` the requests whose LoRA adapter, if any, `info` lists by name and id."""

    def __init__(self, inner: Llm, info: Callable[[], LlmInfo]) -> None:
        super().__init__(inner)
        self._served_info = info

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """`NotFound` for an adapter this server does not serve (under that id), else the inner Llm's."""
        lora = request.lora_request
        if lora is not None:
            served = self._served_info().lora_adapters or ()
            if not any(a.name == lora.lora_name and a.lora_int_id == lora.lora_int_id for a in served):
                raise NotFound(
                    f"The model `{lora.lora_name}` does not exist: this server serves no LoRA adapter of "
                    f"that name with id {lora.lora_int_id}.",
                    param="model",
                )
        return await self.inner.generate(request)
