"""Errors own their status: one table in `vllm_server.errors`, and no status chosen anywhere else."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

import vllm_llm
import vllm_remote_llm
import vllm_server
from vllm_llm import EngineDead, InvalidRequest, LlmError, PromptTooLong, Remote, Unavailable, Unsupported
from vllm_remote_llm import WireRevisionMismatch
from vllm_server.errors import (
    BadRequest,
    MalformedBody,
    MethodNotAllowed,
    NotFound,
    OtherHttpStatus,
    PayloadTooLarge,
    RequestError,
    Unauthenticated,
    error_body,
    error_row,
    http_exception_error,
    map_error,
    probe_status,
)

# Written out, not computed from the table: (HTTP status, gRPC code, OpenAI error type) per class.
# None (OtherHttpStatus only): the status of the HTTPException it reports passes through.
EXPECTED: dict[str, tuple[int | None, str, str | None]] = {
    "vllm_server.errors.RequestError": (400, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_server.errors.BadRequest": (400, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_server.errors.BadParameter": (400, "INVALID_ARGUMENT", "BadRequestError"),
    # vLLM's FastAPI validation handler types a body that fails validation by the status's phrase.
    "vllm_server.errors.InvalidBody": (400, "INVALID_ARGUMENT", "Bad Request"),
    "vllm_server.errors.InvalidUserInput": (400, "INVALID_ARGUMENT", "InvalidUserInput"),
    # vLLM's HTTPException handler types a body that is no JSON (or not of JSON's media type) the same way.
    "vllm_server.errors.MalformedBody": (400, "INVALID_ARGUMENT", "Bad Request"),
    "vllm_server.errors.Unauthenticated": (401, "UNAUTHENTICATED", "AuthenticationError"),
    "vllm_server.errors.NotFound": (404, "NOT_FOUND", "NotFoundError"),
    "vllm_server.errors.MethodNotAllowed": (405, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_server.errors.PayloadTooLarge": (413, "RESOURCE_EXHAUSTED", "BadRequestError"),
    "vllm_server.errors.OtherHttpStatus": (None, "INVALID_ARGUMENT", None),
    "vllm_llm._errors.LlmError": (500, "INTERNAL", "InternalServerError"),
    "vllm_llm._errors.InvalidRequest": (400, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_llm._errors.InvalidParameter": (400, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_llm._errors.PromptTooLong": (400, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_llm._errors.TooManyMediaItems": (400, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_llm._errors.RemoteInvalidRequest": (400, "INVALID_ARGUMENT", "BadRequestError"),
    "vllm_llm._errors.RemoteNotFound": (404, "NOT_FOUND", "NotFoundError"),
    "vllm_llm._errors.Unsupported": (400, "UNIMPLEMENTED", "BadRequestError"),
    "vllm_llm._errors.NoTokenizer": (501, "UNIMPLEMENTED", "NotImplementedError"),
    "vllm_remote_llm._errors.WireRevisionMismatch": (400, "UNIMPLEMENTED", "BadRequestError"),
    "vllm_remote_llm._mux.SessionEnded": (503, "UNAVAILABLE", "ServiceUnavailableError"),
    "vllm_llm._errors.Unavailable": (503, "UNAVAILABLE", "ServiceUnavailableError"),
    # vLLM's GracefulHTTPError (QueueOverflowError, MaxQueuedTokensError): typed by the status's phrase.
    "vllm_llm._errors.AdmissionRefused": (503, "UNAVAILABLE", "Service Unavailable"),
    "vllm_llm._errors.Remote": (500, "INTERNAL", "InternalServerError"),
    "vllm_llm._errors.EngineDead": (500, "INTERNAL", "InternalServerError"),
}


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _product_errors() -> dict[str, type[BaseException]]:
    """Every error class the product defines under the two bases (test-local subclasses left out)."""
    # Importing the packages defines their error classes; the facades must export them.
    assert vllm_llm.LlmError is LlmError and vllm_remote_llm.WireRevisionMismatch is WireRevisionMismatch
    found = {RequestError, LlmError, *_subclasses(RequestError), *_subclasses(LlmError)}
    return {f"{c.__module__}.{c.__qualname__}": c for c in found if c.__module__.startswith("vllm_")}


def test_every_error_class_has_its_expected_row() -> None:
    classes = _product_errors()
    # A new error class fails here until its expected statuses are written above.
    assert sorted(classes) == sorted(EXPECTED)
    for name, cls in classes.items():
        row = error_row(cls)
        got = (
            None if row.http_status is None else int(row.http_status),
            row.grpc_code.name,
            row.type,
        )
        assert got == EXPECTED[name], name


@pytest.mark.parametrize(
    ("exc", "status", "code", "type_", "message", "param"),
    [
        (
            BadRequest("bad n", param="n"),
            400,
            grpc.StatusCode.INVALID_ARGUMENT,
            "BadRequestError",
            "bad n",
            "n",
        ),
        (Unauthenticated("key"), 401, grpc.StatusCode.UNAUTHENTICATED, "AuthenticationError", "key", None),
        (NotFound("no m", param="model"), 404, grpc.StatusCode.NOT_FOUND, "NotFoundError", "no m", "model"),
        (MethodNotAllowed("GET?"), 405, grpc.StatusCode.INVALID_ARGUMENT, "BadRequestError", "GET?", None),
        (PayloadTooLarge("big"), 413, grpc.StatusCode.RESOURCE_EXHAUSTED, "BadRequestError", "big", None),
        (OtherHttpStatus(422, "odd"), 422, grpc.StatusCode.INVALID_ARGUMENT, "BadRequestError", "odd", None),
        (
            OtherHttpStatus(502, "gw"),
            502,
            grpc.StatusCode.INVALID_ARGUMENT,
            "InternalServerError",
            "gw",
            None,
        ),
        (InvalidRequest("x", param="p"), 400, grpc.StatusCode.INVALID_ARGUMENT, "BadRequestError", "x", "p"),
        (Unsupported("u"), 400, grpc.StatusCode.UNIMPLEMENTED, "BadRequestError", "u", None),
        (Unavailable("later"), 503, grpc.StatusCode.UNAVAILABLE, "ServiceUnavailableError", "later", None),
        (EngineDead("dead"), 500, grpc.StatusCode.INTERNAL, "InternalServerError", "dead", None),
        (Remote("r", code="DATA_LOSS"), 500, grpc.StatusCode.INTERNAL, "InternalServerError", "r", None),
        # Anything unexpected is a 500 whose own text (a path, a secret) is never shown.
        (
            ValueError("/secret"),
            500,
            grpc.StatusCode.INTERNAL,
            "InternalServerError",
            "internal server error",
            None,
        ),
    ],
)
def test_map_error_reports_the_row_message_and_param(
    exc: BaseException, status: int, code: grpc.StatusCode, type_: str, message: str, param: str | None
) -> None:
    mapping = map_error(exc)
    assert (int(mapping.http_status), mapping.grpc_code, mapping.type) == (status, code, type_)
    assert (mapping.message, mapping.param) == (message, param)
    assert error_body(mapping) == {
        "error": {"message": message, "type": type_, "param": param, "code": status}
    }


def test_a_prompt_too_long_keeps_its_param_and_a_wire_mismatch_round_trips_as_unimplemented() -> None:
    too_long = map_error(PromptTooLong(max_model_len=4, prompt_len=9))
    assert (int(too_long.http_status), too_long.grpc_code, too_long.param) == (
        400,
        grpc.StatusCode.INVALID_ARGUMENT,
        "prompt",
    )
    mismatch = map_error(WireRevisionMismatch(server_revision=9, client_revision=1))
    assert mismatch.grpc_code == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, MalformedBody),  # vLLM's HTTPException handler types it by the phrase, "Bad Request"
        (401, Unauthenticated),
        (404, NotFound),
        (405, MethodNotAllowed),
        (413, PayloadTooLarge),
        (503, Unavailable),
        (422, OtherHttpStatus),
        (418, OtherHttpStatus),
    ],
)
def test_an_http_exception_becomes_the_class_of_its_status(status: int, cls: type[Exception]) -> None:
    exc = http_exception_error(status, "detail")
    assert type(exc) is cls
    mapping = map_error(exc)
    assert (int(mapping.http_status), mapping.message) == (status, "detail")


def test_probe_statuses() -> None:
    assert (probe_status(True), probe_status(False)) == (200, 503)


# ---- no status or code chosen outside errors.py ---------------------------------------------------

SERVER_ROOT = Path(vllm_server.__file__).parent
TABLE_MODULE = SERVER_ROOT / "errors.py"


def _status_choices(path: Path) -> list[str]:
    """Where `path` picks an HTTP status or a gRPC code (HTTPStatus.X, HTTPStatus(...), StatusCode.X, ...).

    Also an integer literal in a `status_code=` or `status=` keyword argument.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        where = f"{path.relative_to(SERVER_ROOT)}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("HTTPStatus", "StatusCode"):
                found.append(f"{where}: {owner.id}.{node.attr}")
            if isinstance(owner, ast.Attribute) and owner.attr == "StatusCode":
                found.append(f"{where}: StatusCode.{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "HTTPStatus":
            found.append(f"{where}: HTTPStatus(...)")
        elif isinstance(node, ast.keyword) and node.arg in ("status_code", "status"):
            # `status_code=200`, and `status_code=200 if ok else 503` too.
            literals = [
                n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant) and type(n.value) is int
            ]
            if literals:
                found.append(f"{where}: {node.arg}= with {literals}")
    return found


def _server_sources() -> list[Path]:
    proto = SERVER_ROOT / "grpc" / "proto"  # generated protobuf modules
    return [p for p in sorted(SERVER_ROOT.rglob("*.py")) if proto not in p.parents]


def test_no_status_or_code_is_chosen_outside_the_error_table() -> None:
    sources = _server_sources()
    assert len(sources) > 30 and TABLE_MODULE in sources
    chosen = [hit for path in sources if path != TABLE_MODULE for hit in _status_choices(path)]
    assert chosen == []


def test_the_scan_sees_the_choices_the_table_module_makes() -> None:
    # The scanner is what keeps the rule: it must see the statuses and codes errors.py does choose.
    hits = _status_choices(TABLE_MODULE)
    assert any(": HTTPStatus.NOT_FOUND" in h for h in hits)
    assert any(": StatusCode.RESOURCE_EXHAUSTED" in h for h in hits)
    assert any(": HTTPStatus(...)" in h for h in hits)
