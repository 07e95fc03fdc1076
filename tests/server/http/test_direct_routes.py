"""`DirectRoutes`: the routes that need nothing of FastAPI are called past its routing, and a client sees
the same answers as through FastAPI (routing order, methods, root paths, exception handlers).

The real server's routes over uvicorn with the official `openai` client are at the end; the rules are
shown on a small app driven in process, with and without `DirectRoutes`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
import pytest_asyncio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from tests.support.http_serving import Served, serve, server_state
from tests.support.metrics import sample
from tests.support.mock import tiny_mock
from vllm_server.http.app import build_app
from vllm_server.http.direct import DirectRoutes, direct_routes

if TYPE_CHECKING:
    from starlette.responses import Response as OnlyForTypeCheckers


class Teapot(Exception):
    """An error the app has a handler for."""


async def probe(raw: Request) -> Response:
    """What the request's scope says of the way it came."""
    scope = raw.scope
    through_fastapi = "fastapi_inner_astack" in scope  # FastAPI's route wrapper sets it, always
    return JSONResponse({"fastapi": through_fastapi, "route": scope["route"].path, "path": scope["path"]})


async def by_name(name: str) -> Response:
    return PlainTextResponse(f"by name: {name}")


async def fails(raw: Request) -> Response:
    raise Teapot("short and stout")


async def breaks(raw: Request) -> Response:
    raise RuntimeError("secret internal detail")


async def returns_a_dict(raw: Request) -> dict[str, str]:
    return {"served": "by FastAPI"}


async def takes_a_query(raw: Request, n: int = 0) -> Response:
    return PlainTextResponse(f"n={n}")


async def teapot(_: Request, exc: Exception) -> Response:
    return JSONResponse({"error": str(exc)}, status_code=418)


def small_app(*, direct: bool) -> FastAPI:
    app = FastAPI()
    app.add_api_route("/first/{name}", by_name, methods=["POST"])  # matches /first/shadowed before it
    for path in ("/probe", "/api/probe", "/first/shadowed"):
        app.add_api_route(path, probe, methods=["POST"])
    app.add_api_route("/fails", fails, methods=["POST"])
    app.add_api_route("/breaks", breaks, methods=["POST"])
    app.add_api_route("/dict", returns_a_dict, methods=["POST"])
    app.add_api_route("/query", takes_a_query, methods=["POST"])
    app.add_exception_handler(Teapot, teapot)
    if direct:
        app.add_middleware(DirectRoutes, fastapi_app=app)
    return app


def test_only_routes_that_need_nothing_of_fastapi_are_direct() -> None:
    assert set(direct_routes(small_app(direct=False).routes)) == {
        ("POST", "/probe"),
        ("POST", "/api/probe"),
        ("POST", "/fails"),
        ("POST", "/breaks"),
    }


async def typed_elsewhere(raw: Request) -> OnlyForTypeCheckers:
    """A handler annotated with a name imported only for type checkers (FastAPI takes it)."""
    return PlainTextResponse("served")


def test_a_handler_whose_annotations_do_not_resolve_is_left_to_fastapi() -> None:
    app = small_app(direct=True)
    app.add_api_route("/typed-elsewhere", typed_elsewhere, methods=["POST"])
    assert ("POST", "/typed-elsewhere") not in direct_routes(app.routes)


async def test_an_app_with_such_a_handler_still_serves_both_ways() -> None:
    app = small_app(direct=True)
    app.add_api_route("/typed-elsewhere", typed_elsewhere, methods=["POST"])
    assert await _ask(app, "POST", "/typed-elsewhere") == (200, "served")
    assert (await _ask(app, "POST", "/probe"))[1]["fastapi"] is False


def test_the_servers_inference_routes_are_direct(tiny_model_dir: Path) -> None:
    app = build_app(server_state(tiny_mock(tiny_model_dir)))
    assert set(direct_routes(app.routes)) == {
        ("POST", "/v1/chat/completions"),
        ("POST", "/v1/chat/completions/batch"),
        ("POST", "/v1/completions"),
        ("POST", "/v1/messages"),
        ("POST", "/v1/messages/count_tokens"),
        ("POST", "/v1/responses"),
        ("POST", "/inference/v1/generate"),
        ("POST", "/invocations"),
    }


async def _ask(app: FastAPI, method: str, path: str, *, root_path: str = "") -> tuple[int, Any]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, root_path=root_path)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        response = await client.request(method, root_path + path)
    is_json = response.headers.get("content-type") == "application/json"
    return response.status_code, response.json() if is_json else response.text


async def test_a_direct_route_is_called_past_fastapis_routing() -> None:
    status, body = await _ask(small_app(direct=True), "POST", "/probe")
    assert status == 200
    assert body == {"fastapi": False, "route": "/probe", "path": "/probe"}
    # Without the middleware the same app takes FastAPI's way.
    assert (await _ask(small_app(direct=False), "POST", "/probe"))[1]["fastapi"] is True


async def test_a_scope_with_a_root_path_goes_through_fastapi() -> None:
    # Starlette routes /api/probe under the root path /api to the route /probe, not to /api/probe.
    status, body = await _ask(small_app(direct=True), "POST", "/probe", root_path="/api")
    assert status == 200
    assert body == {"fastapi": True, "route": "/probe", "path": "/api/probe"}


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("POST", "/first/shadowed", 200),  # the route with a parameter comes first and answers
        ("GET", "/probe", 405),
        ("POST", "/nowhere", 404),
        ("POST", "/fails", 418),  # the app's handler for Teapot
        ("POST", "/breaks", 500),  # no handler: Starlette's 500
        ("POST", "/dict", 200),
        ("POST", "/query?n=3", 200),
    ],
)
async def test_a_client_gets_the_same_answer_as_through_fastapi(method: str, path: str, status: int) -> None:
    direct = await _ask(small_app(direct=True), method, path)
    assert direct == await _ask(small_app(direct=False), method, path)
    assert direct[0] == status
    if path == "/first/shadowed":
        assert direct[1] == "by name: shadowed"


async def test_a_handled_error_of_a_direct_route_takes_the_apps_handler() -> None:
    assert await _ask(small_app(direct=True), "POST", "/fails") == (418, {"error": "short and stout"})
    status, body = await _ask(small_app(direct=True), "POST", "/breaks")
    assert status == 500 and "secret" not in body


# ---- the server's own routes, over uvicorn ---------------------------------------------------------


@pytest_asyncio.fixture
async def served(tiny_model_dir: Path) -> AsyncIterator[Served]:
    async with serve(server_state(tiny_mock(tiny_model_dir))) as running:
        yield running


async def test_a_streamed_chat_is_served_counted_under_its_route_and_named(served: Served) -> None:
    async with served.client.chat.completions.with_streaming_response.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        max_tokens=4,
        stream=True,
        extra_body={"ignore_eos": True},
    ) as response:
        named = response.headers["x-request-id"]
        chunks = [chunk async for chunk in await response.parse()]
    assert {c.id for c in chunks} == {f"chatcmpl-{named}"}
    assert sum(len(c.choices[0].delta.content or "") > 0 for c in chunks if c.choices) == 4
    metrics = (await served.http.get("/metrics")).text
    counted = {"handler": "/v1/chat/completions", "method": "POST", "status": "200"}
    assert sample(metrics, "vllm_frontend:http_requests_total", **counted) == 1.0


async def test_a_bad_request_on_a_direct_route_gets_openais_error(served: Served) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await served.client.chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "hi"}], max_tokens=-1
        )
    assert caught.value.body is not None
    metrics = (await served.http.get("/metrics")).text
    counted = {"handler": "/v1/chat/completions", "method": "POST", "status": "400"}
    assert sample(metrics, "vllm_frontend:http_requests_total", **counted) == 1.0
