"""Translation of gRPC failures into the Llm layer's errors, once, at the edge.

Status code            error
INVALID_ARGUMENT    →  RemoteInvalidRequest   the server rejected the request
NOT_FOUND           →  RemoteNotFound         the server serves no model or LoRA adapter of that name
                                              and id (a worker that unloaded an adapter, or never
                                              loaded it); like INVALID_ARGUMENT, not tried elsewhere
UNIMPLEMENTED       →  Unsupported            the server's Llm cannot do it (round-trips the server's
                                              Unsupported, which it maps to UNIMPLEMENTED)
UNAVAILABLE         →  Unavailable            not now: no worker serves, draining, unreachable
                       AdmissionRefused       ... a queue limit refused it (the refusal the trailing
                                              metadata or MuxError names)
DEADLINE_EXCEEDED   →  Unavailable            the server did not answer in time; like UNAVAILABLE, a
                                              retry (elsewhere, later) may succeed, and the caller
                                              reports 503, not a server fault
any other           →  Remote(code=<name>)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import grpc

from vllm_llm import (
    ADMISSION_REASONS,
    AdmissionRefused,
    LlmError,
    Remote,
    RemoteInvalidRequest,
    RemoteNotFound,
    Unavailable,
    Unsupported,
)
from vllm_remote_llm.protocol import refusal_of


class WireRevisionMismatch(Unsupported):
    """The server speaks a wire revision more than one away from ours."""

    def __init__(self, *, server_revision: int, client_revision: int) -> None:
        super().__init__(
            f"the server speaks wire revision {server_revision}, this client wire revision "
            f"{client_revision}; only adjacent revisions are compatible"
        )
        self.server_revision = server_revision
        self.client_revision = client_revision


def error_of_status(code: grpc.StatusCode, details: str | None, refusal: str | None = None) -> LlmError:
    """The Llm error for a failed call's status (`refusal`: the queue limit its metadata names)."""
    message = details or f"the server failed with {code.name}"
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        return RemoteInvalidRequest(message)
    if code == grpc.StatusCode.NOT_FOUND:
        return RemoteNotFound(message)
    if code == grpc.StatusCode.UNIMPLEMENTED:
        return Unsupported(message)
    if code == grpc.StatusCode.UNAVAILABLE:
        for reason in ADMISSION_REASONS:
            if refusal == reason:
                return AdmissionRefused(reason)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return Unavailable(message)
    return Remote(message, code=code.name)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Raise a failed call's `AioRpcError` as the matching `LlmError` (the gRPC error is its cause)."""
    try:
        yield
    except grpc.aio.AioRpcError as exc:
        raise error_of_status(exc.code(), exc.details(), refusal_of(exc.trailing_metadata())) from exc
