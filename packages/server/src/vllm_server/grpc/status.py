"""The one way a gRPC call ends with an error: the status the error table (`map_error`) gives it."""

from __future__ import annotations

import logging
from typing import Any, NoReturn

from vllm_llm import AdmissionRefused, LlmError
from vllm_remote_llm.protocol import REFUSAL_KEY
from vllm_server.errors import RequestError, map_error

__all__ = ["ServicerContext", "abort_call"]

logger = logging.getLogger(__name__)

ServicerContext = Any  # grpc.aio.ServicerContext; grpcio ships no type hints


async def abort_call(context: ServicerContext, exc: BaseException, *, service: str) -> NoReturn:
    """End the call with `exc`'s mapped status (`context.abort` raises); unexpected errors are logged."""
    if not isinstance(exc, LlmError | RequestError):
        logger.exception("%s handler failed", service, exc_info=exc)
    mapping = map_error(exc)
    # A queue limit's refusal names the limit, so a RemoteLlm raises the same AdmissionRefused.
    trailing = ((REFUSAL_KEY, exc.reason),) if isinstance(exc, AdmissionRefused) else ()
    await context.abort(mapping.grpc_code, mapping.message, trailing)
    raise AssertionError("unreachable: context.abort raises")
