"""The HTTP app: the route table's routes, the middleware, and the one place errors become responses."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from vllm_llm import EngineDead, LlmError
from vllm_server.errors import (
    BadRequest,
    InvalidBody,
    MalformedBody,
    RequestError,
    error_body,
    http_exception_error,
    map_error,
)
from vllm_server.http import sagemaker_standards
from vllm_server.http.admission import Admission
from vllm_server.http.direct import DirectRoutes
from vllm_server.http.middleware import (
    ApiKeyMiddleware,
    BodyLimitMiddleware,
    LoadMiddleware,
    RequestIdMiddleware,
)
from vllm_server.http.openai.request_id import REQUEST_ID_KEY
from vllm_server.http.routes import route_table
from vllm_server.state import ServerState, StartupError

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

logger = logging.getLogger(__name__)


def build_app(state: ServerState, *, tracer: Tracer | None = None) -> FastAPI:
    """The FastAPI app over `state`; with `tracer`, a span per HTTP request (`--otlp-traces-endpoint`)."""
    server = state.config.server
    # vLLM's docs routes: /docs, /redoc and /openapi.json, none with --disable-fastapi-docs, /docs from
    # vLLM's own Swagger UI assets with --enable-offline-docs.
    docs = not (server.disable_fastapi_docs or server.enable_offline_docs)
    app = FastAPI(
        title="vLLM frontend",
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url=None if server.disable_fastapi_docs else "/openapi.json",
        root_path=server.root_path,
    )
    if server.enable_offline_docs:
        _offline_docs(app)

    # The route table (`vllm_server.http.routes`): every path next to its handler, gates included.
    routes = route_table(state)
    for route in routes:
        app.add_api_route(route.path, route.handler, methods=[route.method])

    _install_error_handlers(app, log_stack=server.log_error_stack)
    per_turn = server.prepare_per_turn
    admission = Admission(per_turn) if per_turn else None
    # Innermost: the inference routes past FastAPI's routing, a few new ones per loop turn.
    app.add_middleware(DirectRoutes, fastapi_app=app, admission=admission)
    counted = frozenset((route.method, route.path) for route in routes if route.counted)
    app.add_middleware(LoadMiddleware, metrics=state.metrics, load=state.load, counted=counted)
    # Always, as vLLM's: with no allowed origin a preflight request is refused (400), not a 405.
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
    app.add_middleware(RequestIdMiddleware)  # errors of the middleware above carry it too
    own = list(app.user_middleware)
    for name in server.middleware:  # --middleware, outside the server's own (as vLLM adds them last)
        _add_middleware(app, name)
    # Then, as vLLM's: SageMaker's /ping and /invocations, and the customer's middlewares around the rest.
    sagemaker_standards.bootstrap(app)
    _keep_innermost(app, DirectRoutes)  # the package puts its pre/post-processing inside the rest
    if tracer is not None:
        from vllm_server.http.tracing import TracingMiddleware

        app.add_middleware(TracingMiddleware, tracer=tracer)  # around everything: the request's whole time
        own.append(app.user_middleware[0])
    # Our own layers look at a response's start alone; another's (--middleware, a SageMaker customer's)
    # may read or rewrite its body: then a stream's frames take the stack's `send` (`DirectBodySend`).
    app.state.frames_past_the_stack = all(any(m is o for o in own) for m in app.user_middleware)
    return app


def _keep_innermost(app: FastAPI, middleware: Any) -> None:
    """`middleware` moved to the innermost place of `app`'s stack: `DirectRoutes` serves its routes past
    everything inside it, so nothing else may be."""
    kept = [m for m in app.user_middleware if m.cls is middleware]
    app.user_middleware[:] = [m for m in app.user_middleware if m.cls is not middleware] + kept
    app.middleware_stack = None  # built again, in this order, when the first request comes


def _add_middleware(app: FastAPI, name: str) -> None:
    """Add the middleware `name` names (`module.object`): a class as ASGI middleware, a coroutine
    function as HTTP middleware (vLLM's `--middleware`); StartupError for anything else."""
    module_name, _, object_name = name.rpartition(".")
    try:
        imported: Any = getattr(importlib.import_module(module_name), object_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise StartupError(f"--middleware {name}: cannot import it: {exc}") from exc
    if inspect.isclass(imported):
        factory: Any = imported  # narrowed to a class of object by isclass
        app.add_middleware(factory)
    elif inspect.iscoroutinefunction(imported):
        app.middleware("http")(imported)
    else:
        raise StartupError(f"--middleware {name}: Invalid middleware {name}. Must be a function or a class.")


def _offline_docs(app: FastAPI) -> None:
    """/docs over the Swagger UI assets vLLM ships (`--enable-offline-docs`), served under /static."""
    from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
    from fastapi.staticfiles import StaticFiles

    spec = importlib.util.find_spec("vllm")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    static = [p for root in roots if (p := Path(root, "entrypoints/serve/instrumentator/static")).is_dir()]
    if not static:
        raise StartupError(
            "--enable-offline-docs serves the Swagger UI assets vLLM ships, and vLLM is not installed here"
        )
    app.mount("/static", StaticFiles(directory=str(static[0])), name="static")
    redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.root_path + (app.openapi_url or "/openapi.json"),
            title=app.title + " - Swagger UI",
            oauth2_redirect_url=redirect,
            swagger_js_url="/static/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger-ui.css",
        )

    async def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_api_route("/docs", swagger_ui, methods=["GET"], include_in_schema=False)
    app.add_api_route(redirect, swagger_redirect, methods=["GET"], include_in_schema=False)


def _install_error_handlers(app: FastAPI, *, log_stack: bool) -> None:
    def respond(request: Request, exc: BaseException, *, cause: BaseException | None = None) -> JSONResponse:
        if log_stack:
            _log_error_stack(request, exc if cause is None else cause)
        mapping = map_error(exc)
        if mapping.server_fault:
            logger.warning("request failed: %s: %s", type(exc).__name__, exc)
        return JSONResponse(error_body(mapping), status_code=int(mapping.http_status))

    @app.exception_handler(LlmError)
    async def llm_error(request: Request, exc: LlmError) -> JSONResponse:
        return respond(request, exc)

    @app.exception_handler(RequestError)
    async def request_error(request: Request, exc: RequestError) -> JSONResponse:
        return respond(request, exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = BadRequest(_validation_message(exc), param=_validation_param(exc))
        return respond(request, error, cause=exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Starlette's 404 (no route) and 405 (another method), FastAPI's 400 (an unparsable body), ...
        return respond(request, http_exception_error(exc.status_code, str(exc.detail)), cause=exc)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unexpected error")
        return respond(request, exc)


def _log_error_stack(request: Request, exc: BaseException) -> None:
    """--log-error-stack: vLLM's exception handlers' line for `exc`, with the id the request ran under.

    As vLLM's: the stack of a body that fails validation, of a FastAPI HTTPException and of a dead
    engine; an ERROR line without it for any other error. Starlette's own 404 and 405 are not logged.
    """
    request_id = getattr(request.state, REQUEST_ID_KEY, None)
    if isinstance(exc, (RequestValidationError, InvalidBody, MalformedBody)):
        logger.exception("RequestValidationError caught. Request id: %s", request_id)
    elif isinstance(exc, HTTPException):
        logger.exception("HTTPException caught. Request id: %s", request_id)
    elif isinstance(exc, EngineDead):
        logger.exception("Engine Exception caught. Request id: %s", request_id)
    elif not isinstance(exc, StarletteHTTPException):  # FastAPI's own handler answers those under vLLM
        logger.error("Exception caught. Request id: %s", request_id)


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
