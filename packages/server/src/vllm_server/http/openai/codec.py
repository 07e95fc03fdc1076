"""JSON in and out: request bodies decoded into msgspec Structs, responses encoded with one msgspec Encoder.

A body is decoded strictly first; one the strict decoder rejects is decoded again as plain JSON, checked
as vLLM's `mode="before"` validators check the raw values (`RAW_NUMBERS`), coerced by pydantic's lax
rules (`lax`) and converted strictly, so what vLLM's lax models accept is accepted at no cost to a
well-typed body. A body that is not JSON or fails validation is `InvalidBody`, worded as vLLM words
pydantic's errors (`validation`).
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from fastapi import Request, Response

from vllm_server.errors import BadParameter, BadRequest, InvalidBody, MalformedBody
from vllm_server.http.openai.lax import coerce
from vllm_server.http.openai.validation import json_issue, validation_issue

__all__ = ["check_json_media_type", "decode_body", "decode_json", "encode", "json_response"]

T = TypeVar("T")

_ENCODER = msgspec.json.Encoder()
_DECODERS: dict[type[Any], msgspec.json.Decoder[Any]] = {}
_RAW = msgspec.json.Decoder()


def encode(obj: object) -> bytes:
    """`obj` as JSON bytes."""
    return _ENCODER.encode(obj)


def json_response(obj: object) -> Response:
    """A JSON response of `obj`, encoded once with msgspec."""
    return Response(_ENCODER.encode(obj), media_type="application/json")


async def decode_body(request: Request, type_: type[T]) -> T:
    """The request's JSON body as `type_`; `BadRequest` for another media type, bad JSON or bad fields."""
    check_json_media_type(request)
    return decode_json(await request.body(), type_)


def check_json_media_type(request: Request) -> None:
    """`MalformedBody` unless the request's body is JSON (vLLM's validate_json_request, worded as its
    RequestValidationError handler words it)."""
    media_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise MalformedBody(
            "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed"
        )


def decode_json(body: bytes, type_: type[T]) -> T:
    """`body` (JSON) as `type_`; `BadRequest` for bad JSON or bad fields."""
    decoder = _DECODERS.get(type_)
    if decoder is None:
        decoder = _DECODERS[type_] = msgspec.json.Decoder(type_)
    try:
        decoded: T = decoder.decode(body)
    except msgspec.ValidationError:
        return _decode_lax(body, type_)
    except msgspec.DecodeError as exc:
        raise _not_json(body, exc) from exc
    except RecursionError as exc:
        raise BadRequest("JSON decode error: the body nests too deeply") from exc
    return decoded


def _decode_lax(body: bytes, type_: type[T]) -> T:
    """`body` as `type_` after vLLM's checks of raw values and pydantic's lax coercions."""
    try:
        raw = _RAW.decode(body)
    except msgspec.ValidationError as exc:  # a number JSON writes and no field can hold (1e999)
        raise BadRequest(str(exc)) from exc
    except msgspec.DecodeError as exc:
        raise _not_json(body, exc) from exc
    except RecursionError as exc:
        raise BadRequest("JSON decode error: the body nests too deeply") from exc
    try:
        if isinstance(raw, dict):
            _check_raw_numbers(raw, getattr(type_, "RAW_NUMBERS", ()))
        converted: T = msgspec.convert(coerce(raw, type_), type_, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidBody([validation_issue(exc, raw, type_)]) from exc
    except RecursionError as exc:
        raise BadRequest("JSON decode error: the body nests too deeply") from exc
    return converted


def _not_json(body: bytes, exc: msgspec.DecodeError) -> BadRequest:
    """FastAPI's error for a body that is not JSON, where Python's parser (FastAPI's) agrees it is not."""
    issue = json_issue(body)
    return BadRequest(f"JSON decode error: {exc}") if issue is None else InvalidBody([issue])


def _check_raw_numbers(raw: dict[str, Any], names: tuple[str, ...]) -> None:
    """vLLM's check_logprobs: these fields, read before any coercion, must be JSON numbers (or null)."""
    for name in names:
        value = raw.get(name)
        if value is not None and not isinstance(value, int | float):
            raise BadParameter(f"`{name}` must be an integer.", param=name, value=value)
