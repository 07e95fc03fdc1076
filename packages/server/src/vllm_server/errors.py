"""Errors that own their status: one table maps each error class to its HTTP status, gRPC code and
OpenAI error type, found through the exception's MRO. Nobody picks a status or a code at a raise site.

The server's own request errors (the `vllm_llm` errors stay in `vllm_llm`; the same table maps them):

RequestError(message, param)         a bad request the server itself detects
├── BadRequest                       malformed body, bad parameter              400  INVALID_ARGUMENT
│   └── MalformedBody                no JSON, or not of JSON's media type       400  INVALID_ARGUMENT
│   └── BadParameter(param, value)   a bad parameter vLLM refuses with a VLLMValidationError: its message
│                                    ends with vLLM's ` (parameter=..., value=...)`
│   └── InvalidBody(issues)          a body that is not JSON or fails validation:
│                                    type "Bad Request", as vLLM's FastAPI handler
│   └── InvalidUserInput             a runtime LoRA load or unload vLLM refuses: type "InvalidUserInput"
├── Unauthenticated                  no or a wrong API key                      401  UNAUTHENTICATED
├── NotFound                         unknown model, adapter or route            404  NOT_FOUND
├── MethodNotAllowed                 a known route asked with another method    405  INVALID_ARGUMENT
├── PayloadTooLarge                  a body over the limit                      413  RESOURCE_EXHAUSTED
└── OtherHttpStatus(status, message) an HTTPException of Starlette, FastAPI or an extension route with
                                     a status no class above has: the status passes through
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus

import grpc

from vllm_llm import (
    AdmissionRefused,
    EngineDead,
    InvalidRequest,
    LlmError,
    NoTokenizer,
    Remote,
    RemoteInvalidRequest,
    RemoteNotFound,
    Unavailable,
    Unsupported,
    with_parameter,
)

__all__ = [
    "ERROR_TABLE",
    "BadParameter",
    "BadRequest",
    "BodyIssue",
    "ErrorMapping",
    "ErrorRow",
    "InvalidBody",
    "InvalidUserInput",
    "MalformedBody",
    "MethodNotAllowed",
    "NotFound",
    "OtherHttpStatus",
    "PayloadTooLarge",
    "RequestError",
    "Unauthenticated",
    "error_body",
    "error_row",
    "http_exception_error",
    "map_error",
    "probe_status",
]


class RequestError(Exception):
    """Base of the bad requests the server itself detects (malformed body, unknown model, ...)."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


class BadRequest(RequestError):
    """A malformed body or a bad parameter; `param` names it when there is one."""


class BadParameter(BadRequest):
    """A bad parameter worded as vLLM's VLLMValidationError words it: the message, then
    ` (parameter=PARAM, value=VALUE)`, the value left out when it is None (vLLM's `__str__`)."""

    def __init__(self, message: str, *, param: str, value: object = None) -> None:
        super().__init__(with_parameter(message, param, value), param=param)
        self.value = value


class InvalidUserInput(BadRequest):
    """A runtime LoRA load or unload vLLM refuses (no name or path, a base model's name, a name already
    loaded), typed as vLLM types it: "InvalidUserInput"."""


class MalformedBody(BadRequest):
    """A body that is no JSON or not of JSON's media type, where vLLM answers from its HTTPException or
    RequestValidationError handler (typed by the status's phrase, "Bad Request")."""


@dataclass(frozen=True, slots=True)
class BodyIssue:
    """One reason a body fails validation, as pydantic words it (`type`, `msg`, `input`, `ctx`), at `loc`
    ("body", then field names and list indices); `input` is already vLLM's short stand-in for the value."""

    type: str
    loc: tuple[str | int, ...]
    msg: str
    input: str
    ctx: dict[str, str | int | float] | None = None

    def __str__(self) -> str:
        # The repr of pydantic's error dict, its loc dotted, as vLLM's validation handler prints it.
        shown: dict[str, object] = {
            "type": self.type,
            "loc": self.where,
            "msg": self.msg,
            "input": self.input,
        }
        if self.ctx is not None:
            shown["ctx"] = self.ctx
        return str(shown)

    @property
    def where(self) -> str:
        """The dotted location: `body.messages.0.content`."""
        return ".".join(str(part) for part in self.loc)


class InvalidBody(BadRequest):
    """A body that is not JSON or fails validation, worded as vLLM's validation handler words pydantic's
    errors: `N validation error(s):` and each issue on its own line; `param` is the first one's location.
    An issue may be plain text (a media type refused before the body is read)."""

    def __init__(self, issues: Sequence[BodyIssue | str]) -> None:
        label = "error" if len(issues) == 1 else "errors"
        lines = "".join(f"\n  {issue}" for issue in issues)
        first = issues[0] if issues else None
        super().__init__(
            f"{len(issues)} validation {label}:{lines}",
            param=first.where if isinstance(first, BodyIssue) else None,
        )
        self.issues = tuple(issues)


class Unauthenticated(RequestError):
    """The request carries no API key, or a wrong one."""


class NotFound(RequestError):
    """An unknown model, adapter or route."""


class MethodNotAllowed(RequestError):
    """A known route asked with a method it does not serve."""


class PayloadTooLarge(RequestError):
    """The request body is over the server's limit."""


class OtherHttpStatus(RequestError):
    """An HTTPException (Starlette, FastAPI, an extension route) whose status no other class has."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True, slots=True)
class ErrorRow:
    """How one error class is reported: HTTP status, gRPC code, OpenAI error type.

    `http_status` None: the exception's own status (`OtherHttpStatus`), and then `type` None: by the
    status's class. `message` None: the exception's own message; a text: that text instead (unexpected
    errors never show theirs).
    """

    http_status: HTTPStatus | None
    grpc_code: grpc.StatusCode
    type: str | None
    message: str | None = None


_BAD_REQUEST = ErrorRow(HTTPStatus.BAD_REQUEST, grpc.StatusCode.INVALID_ARGUMENT, "BadRequestError")
_INTERNAL = ErrorRow(HTTPStatus.INTERNAL_SERVER_ERROR, grpc.StatusCode.INTERNAL, "InternalServerError")

#: Each error class and how it is reported; a class without a row takes its nearest base's (MRO).
ERROR_TABLE: dict[type[BaseException], ErrorRow] = {
    # The server's own request errors.
    RequestError: _BAD_REQUEST,
    BadRequest: _BAD_REQUEST,
    MalformedBody: ErrorRow(HTTPStatus.BAD_REQUEST, grpc.StatusCode.INVALID_ARGUMENT, "Bad Request"),
    InvalidUserInput: ErrorRow(HTTPStatus.BAD_REQUEST, grpc.StatusCode.INVALID_ARGUMENT, "InvalidUserInput"),
    # vLLM's FastAPI validation handler types these by the status's phrase.
    InvalidBody: ErrorRow(
        HTTPStatus.BAD_REQUEST, grpc.StatusCode.INVALID_ARGUMENT, HTTPStatus.BAD_REQUEST.phrase
    ),
    Unauthenticated: ErrorRow(
        HTTPStatus.UNAUTHORIZED, grpc.StatusCode.UNAUTHENTICATED, "AuthenticationError"
    ),
    NotFound: ErrorRow(HTTPStatus.NOT_FOUND, grpc.StatusCode.NOT_FOUND, "NotFoundError"),
    MethodNotAllowed: ErrorRow(
        HTTPStatus.METHOD_NOT_ALLOWED, grpc.StatusCode.INVALID_ARGUMENT, "BadRequestError"
    ),
    PayloadTooLarge: ErrorRow(
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE, grpc.StatusCode.RESOURCE_EXHAUSTED, "BadRequestError"
    ),
    OtherHttpStatus: ErrorRow(None, grpc.StatusCode.INVALID_ARGUMENT, None),
    # The Llm layer's errors (PromptTooLong takes InvalidRequest's row).
    InvalidRequest: _BAD_REQUEST,
    RemoteInvalidRequest: _BAD_REQUEST,
    # A worker serves no adapter of that name and id: 404 as vLLM, NOT_FOUND so it round-trips.
    RemoteNotFound: ErrorRow(HTTPStatus.NOT_FOUND, grpc.StatusCode.NOT_FOUND, "NotFoundError"),
    # UNIMPLEMENTED on gRPC (not INVALID_ARGUMENT), so it round-trips through RemoteLlm as Unsupported.
    Unsupported: ErrorRow(HTTPStatus.BAD_REQUEST, grpc.StatusCode.UNIMPLEMENTED, "BadRequestError"),
    # A token-only Llm asked for text: the server's configuration, not the request, is at fault.
    NoTokenizer: ErrorRow(HTTPStatus.NOT_IMPLEMENTED, grpc.StatusCode.UNIMPLEMENTED, "NotImplementedError"),
    Unavailable: ErrorRow(
        HTTPStatus.SERVICE_UNAVAILABLE, grpc.StatusCode.UNAVAILABLE, "ServiceUnavailableError"
    ),
    # A queue limit (vLLM's GracefulHTTPError): typed by the status's phrase, "Service Unavailable".
    AdmissionRefused: ErrorRow(
        HTTPStatus.SERVICE_UNAVAILABLE, grpc.StatusCode.UNAVAILABLE, HTTPStatus.SERVICE_UNAVAILABLE.phrase
    ),
    EngineDead: _INTERNAL,
    Remote: _INTERNAL,
    LlmError: _INTERNAL,
    # Anything else is a bug: 500 / INTERNAL, and its text (maybe a secret, a path) stays in the log.
    BaseException: ErrorRow(
        HTTPStatus.INTERNAL_SERVER_ERROR,
        grpc.StatusCode.INTERNAL,
        "InternalServerError",
        "internal server error",
    ),
}


def error_row(cls: type[BaseException]) -> ErrorRow:
    """The row of `cls`: its own, else that of its nearest base in the MRO."""
    return next(ERROR_TABLE[c] for c in cls.__mro__ if c in ERROR_TABLE)


@dataclass(frozen=True)
class ErrorMapping:
    """How one error is reported on HTTP and gRPC."""

    http_status: HTTPStatus
    grpc_code: grpc.StatusCode
    type: str
    message: str
    param: str | None = None

    @property
    def server_fault(self) -> bool:
        """Whether the server, not the request, is at fault (5xx): worth a log line."""
        return self.http_status >= HTTPStatus.INTERNAL_SERVER_ERROR


def map_error(exc: BaseException) -> ErrorMapping:
    """The HTTP status, gRPC code, OpenAI error type, message and param of `exc`, by its class's row."""
    row = error_row(type(exc))
    status = row.http_status
    type_ = row.type
    if status is None:  # OtherHttpStatus: the status its raiser chose passes through
        assert isinstance(exc, OtherHttpStatus)
        status = HTTPStatus(exc.status)
        type_ = "InternalServerError" if status >= HTTPStatus.INTERNAL_SERVER_ERROR else "BadRequestError"
    assert type_ is not None
    message = row.message if row.message is not None else getattr(exc, "message", str(exc))
    param = exc.param if isinstance(exc, RequestError | InvalidRequest) else None
    return ErrorMapping(status, row.grpc_code, type_, message, param)


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


#: The error that reports an HTTPException of each status (Starlette's 404 and 405, FastAPI's 400, ...).
_OF_HTTP_STATUS: dict[int, type[RequestError] | type[LlmError]] = {
    HTTPStatus.BAD_REQUEST: MalformedBody,  # typed "Bad Request", as vLLM's HTTPException handler types it
    HTTPStatus.UNAUTHORIZED: Unauthenticated,
    HTTPStatus.NOT_FOUND: NotFound,
    HTTPStatus.METHOD_NOT_ALLOWED: MethodNotAllowed,
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE: PayloadTooLarge,
    HTTPStatus.SERVICE_UNAVAILABLE: Unavailable,
}


def http_exception_error(status_code: int, detail: str) -> Exception:
    """The error class that reports an HTTPException with `status_code` (another status passes through)."""
    cls = _OF_HTTP_STATUS.get(status_code)
    return OtherHttpStatus(status_code, detail) if cls is None else cls(detail)


_PROBE_UP = int(HTTPStatus.OK)
_PROBE_DOWN = int(HTTPStatus.SERVICE_UNAVAILABLE)


def probe_status(up: bool) -> int:
    """The HTTP status of a probe (`/health`, `/ready`): 200 while `up`, else 503."""
    return _PROBE_UP if up else _PROBE_DOWN
