"""The id of an HTTP request: the `X-Request-Id` header, else the body's `request_id`, else a random one."""

from __future__ import annotations

import secrets

from fastapi import Request

#: Where `base_request_id` records the id it chose (`scope["state"]`), for the X-Request-Id header.
REQUEST_ID_KEY = "request_id"

__all__ = ["REQUEST_ID_KEY", "base_request_id"]


def base_request_id(request: Request, given: str | None) -> str:
    """The request id: the `X-Request-Id` header, else the body's `request_id`, else a random one."""
    header = request.headers.get("x-request-id")
    if header is not None:
        return header
    request_id = given or secrets.token_hex(16)
    setattr(request.state, REQUEST_ID_KEY, request_id)  # the X-Request-Id response header names it
    return request_id
