"""The servicer of `vllm.internal.Llm` over any `Llm`: Generate, Info and Abort.

Errors go through the one mapper (`map_error`) and `context.abort`; a validation error of the Llm
arrives as the call's status before any output. A cancelled call (client cancel, disconnect, deadline,
or the server stopping after its grace) closes the Llm stream in `finally`, which aborts the request.
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn, cast

import grpc

from vllm_llm import InvalidRequest, Llm, LlmError, Unavailable
from vllm_llm.wire import AbortRequest, AbortResponse, GenerateRequest, InfoRequest, LlmInfo
from vllm_remote_llm._grpc_wire import LlmServicer, add_llm_servicer
from vllm_remote_llm.protocol import ACCEPTED_METADATA
from vllm_server.errors import map_error

logger = logging.getLogger(__name__)

ServicerContext = Any  # grpc.aio.ServicerContext; grpcio ships no type hints


class LlmService:
    """Serves `vllm.internal.Llm` from an `Llm`; register it with `register(server)`."""

    _llm: Llm
    _draining: bool

    def __init__(self, llm: Llm) -> None:
        self._llm = llm
        self._draining = False

    def register(self, server: grpc.aio.Server) -> None:
        """Add the service to `server` (from the generated method table)."""
        # Generate is a coroutine that writes with `context.write` (see its docstring), not the async
        # generator the generated protocol names; grpc.aio accepts both styles for a streaming handler.
        add_llm_servicer(server, cast(LlmServicer, self))

    def begin_drain(self) -> None:
        """Refuse new Generate calls with UNAVAILABLE from now on; calls in flight go on."""
        self._draining = True

    async def Generate(self, request: GenerateRequest, context: ServicerContext) -> None:
        """Stream the Llm's delta outputs; cancelling the call aborts the request.

        A cancellation of the call (client cancel, disconnect, deadline, the server's grace running out)
        lands in this handler; `finally` closes the Llm stream, which aborts the request.
        """
        if self._draining:
            await _abort(context, Unavailable("the server is draining; send the request elsewhere"))
        try:
            stream = await self._llm.generate(request)
        except Exception as exc:
            await _abort(context, exc)
        try:
            await context.send_initial_metadata(ACCEPTED_METADATA)
            async for out in stream:
                await context.write(out)
        except Exception as exc:
            await _abort(context, exc)
        finally:
            await stream.aclose()

    async def Info(self, request: InfoRequest, context: ServicerContext) -> LlmInfo:
        """The Llm's `LlmInfo`."""
        try:
            return self._llm.info()
        except Exception as exc:
            await _abort(context, exc)

    async def Abort(self, request: AbortRequest, context: ServicerContext) -> AbortResponse:
        """Abort by external id; an empty list is rejected."""
        if not request.request_ids:
            await _abort(
                context,
                InvalidRequest(
                    "request_ids must not be empty: aborting every request of a shared server "
                    "is not one caller's to do",
                    param="request_ids",
                ),
            )
        try:
            await self._llm.abort(request.request_ids)
        except Exception as exc:
            await _abort(context, exc)
        return AbortResponse()


async def _abort(context: ServicerContext, exc: Exception) -> NoReturn:
    """End the call with the status `map_error` gives `exc` (`context.abort` raises)."""
    if not isinstance(exc, LlmError):
        logger.exception("vllm.internal.Llm handler failed", exc_info=exc)
    mapping = map_error(exc)
    await context.abort(mapping.grpc_code, mapping.message)
    raise AssertionError("unreachable: context.abort raises")
