"""The transport defaults of `vllm-frontend serve` against vLLM's own server: the docs routes, CORS with no
allowed origin, uvicorn's handling of many headers. Ours runs as a user starts it, with no flag beyond its
source (the mock: these routes and checks never reach an Llm); each flag's effect:
tests/server/test_frontend_flags.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest_asyncio

from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import Frontend, ServerProcess


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mock() -> AsyncIterator[httpx.AsyncClient]:
    front = await Frontend.start("--mock", "--grpc-port", "-1", "--served-model-name", "tiny")
    try:
        async with httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE) as http:
            yield http
    finally:
        await front.stop(10)


async def _both(
    vllm_server: ServerProcess, ours: httpx.AsyncClient, method: str, path: str, headers: dict[str, str]
) -> tuple[httpx.Response, httpx.Response]:
    async with httpx.AsyncClient(base_url=vllm_server.base_url, timeout=PATIENCE) as theirs:
        return (
            await theirs.request(method, path, headers=headers),
            await ours.request(method, path, headers=headers),
        )


async def test_docs_routes(vllm_server: ServerProcess, mock: httpx.AsyncClient) -> None:
    for path in ("/docs", "/redoc", "/openapi.json", "/docs/oauth2-redirect"):
        theirs, ours = await _both(vllm_server, mock, "GET", path, {})
        assert (ours.status_code, ours.headers["content-type"]) == (
            theirs.status_code,
            theirs.headers["content-type"],
        ), path
    theirs, ours = await _both(vllm_server, mock, "GET", "/openapi.json", {})
    assert ours.json()["openapi"] == theirs.json()["openapi"]
    assert "/v1/chat/completions" in ours.json()["paths"]


async def test_a_preflight_with_no_allowed_origin(
    vllm_server: ServerProcess, mock: httpx.AsyncClient
) -> None:
    asked = {"Origin": "http://app", "Access-Control-Request-Method": "POST"}
    theirs, ours = await _both(vllm_server, mock, "OPTIONS", "/v1/chat/completions", asked)
    assert (
        (ours.status_code, ours.text) == (theirs.status_code, theirs.text) == (400, "Disallowed CORS origin")
    )
    # a plain request from another origin is served, with no CORS header, on both
    theirs, ours = await _both(vllm_server, mock, "GET", "/v1/models", {"Origin": "http://app"})
    assert theirs.status_code == ours.status_code == 200
    for response in (theirs, ours):
        assert "access-control-allow-origin" not in response.headers


async def test_many_headers(vllm_server: ServerProcess, mock: httpx.AsyncClient) -> None:
    # vLLM's --h11-max-header-count defaults to 256 and limits nothing (see test_frontend_flags.py)
    many = {f"x-h{i}": "v" for i in range(300)}
    theirs, ours = await _both(vllm_server, mock, "GET", "/v1/models", many)
    assert theirs.status_code == ours.status_code == 200
