"""`DirectRoutes`: the routes that need nothing of FastAPI at request time, called from the middleware.

A handler that takes the `Request` alone and returns a `Response` (chat and text completions,
messages, responses, tokens in / tokens out) has no parameter for FastAPI to parse, no dependency to
solve and no response model to serialize. FastAPI still passes each of its requests through its
exception middleware, its exit-stack middleware, Starlette's router (a regex per route, in order), the
route's handler wrapper with two more exit stacks, Starlette's exception wrapper and FastAPI's
dependency solver. Past them: 598 -> 493 µs of a `--mock` server's CPU per one-token streamed chat
request at c=32 (docs/performance.md, "Per request").

`DirectRoutes`, the innermost middleware, looks such a route up by method and path in a dict built
once, sets the scope keys Starlette's router sets (`route`, `endpoint`, `path_params`, `router`) and
calls the handler within Starlette's own exception wrapper, with the handlers FastAPI's exception
middleware would use: what the client sees is the same. Everything else goes on to FastAPI as before:
another route, a route with path parameters or dependencies, a method the route does not serve, a
path another route would match first, a scope with a `root_path`.

With an `Admission` (a router's `--prepare-per-turn`), a direct route's handler waits for its turn
first: a burst of new requests is prepared a few per event-loop turn (see `admission.py`).
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette._exception_handler import wrap_app_handling_exceptions
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from vllm_server.http.admission import Admission

__all__ = ["DirectRoutes", "direct_routes"]


class DirectRoutes:
    """Innermost ASGI middleware: a direct route's handler called past FastAPI's routing (see the module
    docstring); every other request goes on to `app`."""

    def __init__(self, app: ASGIApp, *, fastapi_app: FastAPI, admission: Admission | None = None) -> None:
        self.app = app
        self._admission = admission
        self._router = fastapi_app.router
        # Starlette builds the middleware when the first request comes: every route and handler is in.
        self._routes = direct_routes(fastapi_app.routes)
        handlers = {k: v for k, v in fastapi_app.exception_handlers.items() if k not in (500, Exception)}
        # As FastAPI hands them to Starlette's ExceptionMiddleware (500 and Exception go to the outermost).
        self._handlers = (
            {k: v for k, v in handlers.items() if not isinstance(k, int)},
            {k: v for k, v in handlers.items() if isinstance(k, int)},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = None
        if scope["type"] == "http" and not scope.get("root_path"):
            route = self._routes.get((scope["method"], scope["path"]))
        if route is None:
            await self.app(scope, receive, send)
            return
        waiting = None if self._admission is None else self._admission.turn()
        if waiting is not None:
            await waiting
        scope["starlette.exception_handlers"] = self._handlers
        scope.setdefault("router", self._router)
        scope["route"] = route
        scope["endpoint"] = endpoint = route.endpoint
        scope["path_params"] = {}
        request = Request(scope, receive, send)

        async def respond(scope: Scope, receive: Receive, send: Send) -> None:
            response: Response = await endpoint(request)
            await response(scope, receive, send)

        await wrap_app_handling_exceptions(respond, request)(scope, receive, send)


def direct_routes(routes: list[BaseRoute]) -> dict[tuple[str, str], APIRoute]:
    """The routes `DirectRoutes` serves, by (method, path): each route whose handler takes a `Request`
    alone and returns a `Response`, for each of its methods, unless a route before it would match."""
    table: dict[tuple[str, str], APIRoute] = {}
    for index, route in enumerate(routes):
        if not isinstance(route, APIRoute) or not _needs_nothing(route):
            continue
        for method in sorted(route.methods):
            scope = {"type": "http", "method": method, "path": route.path, "root_path": ""}
            if (method, route.path) in table or any(
                earlier.matches(scope)[0] is Match.FULL for earlier in routes[:index]
            ):
                continue
            table[(method, route.path)] = route
    return table


def _needs_nothing(route: APIRoute) -> bool:
    """Whether FastAPI does nothing for `route` but call its handler with the request: no path
    parameters, no dependencies, one parameter (the `Request`), a `Response` returned."""
    dependant = route.dependant
    if route.param_convertors or dependant.dependencies or route.dependencies:
        return False
    if dependant.request_param_name is None or dependant.background_tasks_param_name is not None:
        return False
    parameters = list(inspect.signature(route.endpoint).parameters)
    if parameters != [dependant.request_param_name]:
        return False
    if not inspect.iscoroutinefunction(route.endpoint):
        return False
    try:
        returns: Any = typing.get_type_hints(route.endpoint).get("return")
    except (NameError, TypeError):  # FastAPI takes a handler annotated with a name only a type checker sees
        return False
    return inspect.isclass(returns) and issubclass(returns, Response)
