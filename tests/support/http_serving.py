"""`build_app(state)` served by uvicorn on loopback in the test's event loop, with clients on it.

Each `Served` carries the official `openai` client and an httpx client on that server.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import openai
import uvicorn

from vllm_llm import Llm
from vllm_server.config import FrontendConfig, ServerConfig
from vllm_server.http.app import build_app
from vllm_server.state import ServerState
from vllm_server.wiring import build_state

MODEL = "tiny"


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers (the test runner owns the signals)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class Served:
    """A running server: its state, base URL, and clients on it."""

    state: ServerState
    base_url: str
    http: httpx.AsyncClient
    client: openai.AsyncOpenAI


def server_state(llm: Llm) -> ServerState:
    """The state the tests serve: the tiny model under the name "tiny", layers attached, ready."""
    state = build_state(FrontendConfig(server=ServerConfig(served_model_name=(MODEL,))), llm)
    state.attach_layers()
    state.update_readiness()
    return state


@contextlib.asynccontextmanager
async def serve(state: ServerState) -> AsyncIterator[Served]:
    """Serve `build_app(state)` on an ephemeral loopback port until the block ends."""
    config = uvicorn.Config(build_app(state), host="127.0.0.1", port=0, lifespan="off", log_level="warning")
    server = _Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        base_url = f"http://127.0.0.1:{port}"
        async with (
            httpx.AsyncClient(base_url=base_url, timeout=60) as http,
            openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0) as client,
        ):
            yield Served(state, base_url, http, client)
    finally:
        server.should_exit = True
        await task
