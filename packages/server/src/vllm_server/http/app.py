"""The HTTP app: the route table's routes, the middleware, and the one place errors become responses."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vllm_llm import LlmError
from vllm_server.errors import BadRequest, RequestError, error_body, http_exception_error, map_error
from vllm_server.http.admission import Admission
from vllm_server.http.direct import DirectRoutes
from vllm_server.http.middleware import (
    ApiKeyMiddleware,
    BodyLimitMiddleware,
    LoadMiddleware,
    RequestIdMiddleware,
)
from vllm_server.http.routes import route_table
from vllm_server.state import ServerState

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

logger = logging.getLogger(__name__)


def build_app(state: ServerState, *, tracer: Tracer | None = None) -> FastAPI:
    """The FastAPI app over `state`; with `tracer`, a span per HTTP request (`--otlp-traces-endpoint`)."""
    server = state.config.server
    app = FastAPI(title="vLLM frontend", docs_url=None, redoc_url=None)

    # The route table (`vllm_server.http.routes`): every path next to its handler, gates included.
    routes = route_table(state)
    for route in routes:
        app.add_api_route(route.path, route.handler, methods=[route.method])

    _install_error_handlers(app)
    per_turn = server.prepare_per_turn
    admission = Admission(per_turn) if per_turn else None
    # Innermost: the inference routes past FastAPI's routing, a few new ones per loop turn.
    app.add_middleware(DirectRoutes, fastapi_app=app, admission=admission)
    counted = frozenset((route.method, route.path) for route in routes if route.counted)
    app.add_middleware(LoadMiddleware, metrics=state.metrics, load=state.load, counted=counted)
    if server.allowed_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(server.allowed_origins),
            allow_credentials=server.allow_credentials,
            allow_methods=list(server.allowed_methods),
            allow_headers=list(server.allowed_headers),
        )
    if server.api_key:
        app.add_middleware(ApiKeyMiddleware, api_key=server.api_key)
    app.add_middleware(BodyLimitMiddleware, max_bytes=server.max_request_body_bytes)
    app.add_middleware(RequestIdMiddleware)  # outermost: errors of the middleware above carry it too
    if tracer is not None:
        from vllm_server.http.tracing import TracingMiddleware

        app.add_middleware(TracingMiddleware, tracer=tracer)  # around everything: the request's whole time
    return app


def _install_error_handlers(app: FastAPI) -> None:
    def respond(exc: BaseException) -> JSONResponse:
        mapping = map_error(exc)
        if mapping.server_fault:
            logger.warning("request failed: %s: %s", type(exc).__name__, exc)
        return JSONResponse(error_body(mapping), status_code=int(mapping.http_status))

    @app.exception_handler(LlmError)
    async def llm_error(_: Request, exc: LlmError) -> JSONResponse:
        return respond(exc)

    @app.exception_handler(RequestError)
    async def request_error(_: Request, exc: RequestError) -> JSONResponse:
        return respond(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        return respond(BadRequest(_validation_message(exc), param=_validation_param(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's 404 (no route) and 405 (another method), FastAPI's 400 (an unparsable body), ...
        return respond(http_exception_error(exc.status_code, str(exc.detail)))

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error")
        return respond(exc)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
        parts.append(f"{loc}: {err.get('msg')}" if loc else str(err.get("msg")))
    return "; ".join(parts) or "invalid request"


def _validation_param(exc: RequestValidationError) -> str | None:
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        if loc:
            return loc[0]
    return None
