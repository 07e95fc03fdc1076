"""`Route`: one row of the HTTP route table, a method and a path next to their handler."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, TypeVar

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["BodyHandler", "Handler", "Route"]

#: A FastAPI endpoint: its signature declares what FastAPI parses and validates from the request.
Handler = Callable[..., Awaitable[Any]]
B = TypeVar("B")
#: What serves a request whose body is already decoded (one route's own, `/invocations`' too).
BodyHandler = Callable[[Request, B], Awaitable[Response]]


class Route(NamedTuple):
    """One (method, path, handler) row; the path is also the route's metrics label."""

    method: str
    path: str
    handler: Handler
    #: Whether `/load` counts its requests in progress (vLLM's `load_aware_call` routes: inference).
    counted: bool = False
