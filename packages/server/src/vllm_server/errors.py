"""The one mapper from errors to HTTP statuses and gRPC codes, and OpenAI-style error bodies.

Handlers raise domain errors (`vllm_llm` errors, `RequestError` for bad HTTP input); nobody picks a
status code at a raise site.
"""

from __future__ import annotations

from dataclasses import dataclass
from http import HTTPStatus

import grpc

from vllm_llm import (
    InvalidRequest,
    LlmError,
    RemoteInvalidRequest,
    Unavailable,
    Unsupported,
)


class RequestError(Exception):
    """A bad HTTP request detected by the server itself (malformed body, unknown model, ...)."""

    def __init__(
        self, message: str, *, status: HTTPStatus = HTTPStatus.BAD_REQUEST, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.param = param


@dataclass(frozen=True)
class ErrorMapping:
    """How one error is reported on HTTP and gRPC."""

    http_status: HTTPStatus
    grpc_code: grpc.StatusCode
    type: str
    message: str
    param: str | None = None


def map_error(exc: BaseException) -> ErrorMapping:
    """The HTTP status, gRPC code and OpenAI error type of `exc` (the rest is 500 / INTERNAL)."""
    if isinstance(exc, RequestError):
        return ErrorMapping(
            exc.status,
            _GRPC_OF_HTTP.get(exc.status, grpc.StatusCode.INVALID_ARGUMENT),
            _type_of(exc.status),
            exc.message,
            exc.param,
        )
    if isinstance(exc, InvalidRequest):
        return ErrorMapping(
            HTTPStatus.BAD_REQUEST,
            grpc.StatusCode.INVALID_ARGUMENT,
            "BadRequestError",
            exc.message,
            exc.param,
        )
    if isinstance(exc, RemoteInvalidRequest):
        return ErrorMapping(
            HTTPStatus.BAD_REQUEST, grpc.StatusCode.INVALID_ARGUMENT, "BadRequestError", exc.message
        )
    if isinstance(exc, Unsupported):
        # UNIMPLEMENTED on gRPC (not INVALID_ARGUMENT), so it round-trips through RemoteLlm as Unsupported.
        return ErrorMapping(
            HTTPStatus.BAD_REQUEST, grpc.StatusCode.UNIMPLEMENTED, "BadRequestError", exc.message
        )
    if isinstance(exc, Unavailable):
        return ErrorMapping(
            HTTPStatus.SERVICE_UNAVAILABLE,
            grpc.StatusCode.UNAVAILABLE,
            "ServiceUnavailableError",
            exc.message,
        )
    if isinstance(exc, LlmError):  # EngineDead, Remote and any other Llm failure
        return ErrorMapping(
            HTTPStatus.INTERNAL_SERVER_ERROR, grpc.StatusCode.INTERNAL, "InternalServerError", exc.message
        )
    return ErrorMapping(
        HTTPStatus.INTERNAL_SERVER_ERROR,
        grpc.StatusCode.INTERNAL,
        "InternalServerError",
        "internal server error",
    )


def error_body(mapping: ErrorMapping) -> dict[str, object]:
    """The OpenAI-style JSON error body (vLLM's ErrorResponse shape); never a stack trace."""
    return {
        "error": {
            "message": mapping.message,
            "type": mapping.type,
            "param": mapping.param,
            "code": int(mapping.http_status),
        }
    }


_GRPC_OF_HTTP: dict[HTTPStatus, grpc.StatusCode] = {
    HTTPStatus.BAD_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    HTTPStatus.UNAUTHORIZED: grpc.StatusCode.UNAUTHENTICATED,
    HTTPStatus.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: grpc.StatusCode.RESOURCE_EXHAUSTED,
    HTTPStatus.SERVICE_UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
}


def _type_of(status: HTTPStatus) -> str:
    return {
        HTTPStatus.BAD_REQUEST: "BadRequestError",
        HTTPStatus.UNAUTHORIZED: "AuthenticationError",
        HTTPStatus.NOT_FOUND: "NotFoundError",
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE: "BadRequestError",
        HTTPStatus.UNPROCESSABLE_ENTITY: "BadRequestError",
        HTTPStatus.SERVICE_UNAVAILABLE: "ServiceUnavailableError",
    }.get(status, "InternalServerError" if status >= 500 else "BadRequestError")
