"""`X-Request-Id`: echoed on every response (generated when absent), and the id a request runs under.

The id reaches a router's worker unchanged (the lowered request's id carries it), so the worker's request
log and traces name the client's id; tests/readme/checks.py reads it in the worker's log.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest_asyncio

from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from vllm_llm import MockLlm
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@pytest_asyncio.fixture
async def router(tiny_model_dir: Path) -> AsyncIterator[tuple[httpx.AsyncClient, MockLlm]]:
    """An HTTP client of a router over a worker over a MockLlm (both full servers, in process)."""
    mock = tiny_mock(tiny_model_dir)
    worker = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock))
    remote = await RemoteLlm.connect(worker.grpc_target)
    router: RunningServer = await start_server(
        ServerConfig(port=0, grpc_port=None), LlmSource.provided(remote)
    )
    async with httpx.AsyncClient(base_url=router.base_url, timeout=30) as http:
        yield http, mock
    await router.stop()
    await remote.shutdown()
    await worker.stop()
    await mock.shutdown()


async def test_the_client_id_is_echoed_and_reaches_the_worker(
    router: tuple[httpx.AsyncClient, MockLlm],
) -> None:
    http, mock = router
    response = await http.post("/v1/chat/completions", json=CHAT, headers={"X-Request-Id": "client-7"})
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == "client-7"
    assert response.json()["id"] == "chatcmpl-client-7"
    assert [r.request_id for r in mock.requests] == ["chatcmpl-client-7"]


async def test_a_missing_id_is_generated_and_names_the_request(
    router: tuple[httpx.AsyncClient, MockLlm],
) -> None:
    http, mock = router
    response = await http.post("/v1/chat/completions", json=CHAT)
    generated = response.headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", generated)
    assert response.json()["id"] == f"chatcmpl-{generated}"
    assert mock.requests[-1].request_id == f"chatcmpl-{generated}"
    # the body's request_id, when given, is the one the request runs under and the one echoed
    response = await http.post("/v1/chat/completions", json={**CHAT, "request_id": "body-id"})
    assert response.headers["x-request-id"] == "body-id"
    assert mock.requests[-1].request_id == "chatcmpl-body-id"


async def test_errors_and_other_routes_carry_an_id(router: tuple[httpx.AsyncClient, MockLlm]) -> None:
    http, _ = router
    for response in (
        await http.get("/no/such/route", headers={"X-Request-Id": "e-1"}),
        await http.post("/v1/chat/completions", json={"model": "tiny"}, headers={"X-Request-Id": "e-1"}),
    ):
        assert response.status_code in (400, 404), response.text
        assert response.headers["x-request-id"] == "e-1"
    assert re.fullmatch(r"[0-9a-f]{32}", (await http.get("/v1/models")).headers["x-request-id"])
