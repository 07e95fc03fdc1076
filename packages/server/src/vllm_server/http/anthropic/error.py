"""Anthropic's error body, `{"type": "error", "error": {"type": ..., "message": ...}}`, as vLLM's
translate_error_response makes it: the status and the error type of the chat path's error (vLLM's
ErrorResponse type, e.g. "BadRequestError"), in Anthropic's shape."""

from __future__ import annotations

import logging

from fastapi import Response

from vllm_server.errors import ErrorMapping, map_error
from vllm_server.http.openai import encode

__all__ = ["anthropic_error_body", "anthropic_error_response"]

logger = logging.getLogger(__name__)


def anthropic_error_body(mapping: ErrorMapping) -> dict[str, object]:
    """The Anthropic-shaped body of an error."""
    return {"type": "error", "error": {"type": mapping.type, "message": mapping.message}}


def anthropic_error_response(exc: BaseException) -> Response:
    """The Anthropic-shaped error response of `exc` (status by the one error table)."""
    mapping = map_error(exc)
    if mapping.server_fault:
        logger.warning("request failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
    return Response(
        encode(anthropic_error_body(mapping)),
        status_code=int(mapping.http_status),
        media_type="application/json",
    )
