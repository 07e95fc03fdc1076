"""The router frontend: the full HTTP API over RemoteLlm, text and chat layers local."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from vllm_llm import MockLlm
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


@pytest_asyncio.fixture(params=[False, True], ids=["calls", "mux"])
async def router(
    tiny_model_dir: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[RunningServer, MockLlm]]:
    """A worker over a MockLlm and a router over a RemoteLlm to it (a Generate call per request, or one
    GenerateMux stream), both full servers."""
    mock = tiny_mock(tiny_model_dir, step_interval=0.005)
    worker = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock))
    remote = await RemoteLlm.connect(worker.grpc_target, mux=request.param)
    router = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(remote))
    yield router, mock
    await router.stop()
    await remote.shutdown()
    await worker.stop()
    await mock.shutdown()


async def test_a_client_disconnect_leaves_nothing_running_on_the_worker(
    router: tuple[RunningServer, MockLlm],
) -> None:
    server, mock = router
    running = mock.subscribe_running()
    body = {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
    }
    async with (
        httpx.AsyncClient(base_url=server.base_url, timeout=30) as http,
        http.stream("POST", "/v1/chat/completions", json=body) as stream,
    ):
        assert stream.status_code == 200
        lines = stream.aiter_lines()
        while not (await anext(lines)).startswith("data: "):
            pass
        assert mock.num_running == 1
    # The connection is closed: the router closes its stream, the call is cancelled, the worker aborts.
    assert await asyncio.wait_for(running.wait_for(lambda n: n == 0), 10) == 0
    assert len(mock.aborted) == 1


async def test_chat_over_the_router(router: tuple[RunningServer, MockLlm]) -> None:
    server, mock = router
    client = AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key="unused")
    chat = await client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "hello"}], max_tokens=5, n=2, temperature=0.7
    )
    assert len(chat.choices) == 2
    assert chat.usage is not None
    assert chat.usage.completion_tokens == 10
    assert all(c.finish_reason == "length" for c in chat.choices)
    assert len(mock.requests) == 2  # n=2 fans out into two requests on the worker
    await client.close()
