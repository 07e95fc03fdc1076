"""vLLM's own OpenAI server on the tiny model (`tests.support.vllm_server`), started once per session
beside our worker, with the engine flags our session worker uses where they can change outputs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
import pytest_asyncio

from tests.support.engine import TINY_MAX_MODEL_LEN
from tests.support.servers import RunningServer
from tests.support.vllm_server import vllm_server as running_vllm_server
from vllm_frontend_testing.processes import ServerProcess


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def vllm_server(
    worker: RunningServer, tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerProcess]:
    """vLLM's server, launched once our worker is ready (two engines starting at once starve 2 cores)."""
    async with running_vllm_server(
        tiny_model_dir,
        *("--dtype", "float32", "--max-model-len", str(TINY_MAX_MODEL_LEN), "--seed", "0"),
        # As the session worker's engine (tests/conftest.py `worker`): LoRA slots change the model's
        # layers and prompt embeds the input path.
        *("--enable-lora", "--max-lora-rank", "8", "--max-loras", "2", "--enable-prompt-embeds"),
        # As the session worker's chat layer: hermes tool calls.
        *("--enable-auto-tool-choice", "--tool-call-parser", "hermes"),
        log_dir=tmp_path_factory.mktemp("vllm_server"),
    ) as server:
        yield server


@dataclass
class Pair:
    """The same API twice: vLLM's server (`theirs`) and our worker (`ours`)."""

    theirs: openai.AsyncOpenAI
    ours: openai.AsyncOpenAI
    theirs_http: httpx.AsyncClient
    ours_http: httpx.AsyncClient


def _client(base_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def pair(worker: RunningServer, vllm_server: ServerProcess) -> AsyncIterator[Pair]:
    """Clients of both servers, once both are ready."""
    clients = Pair(
        theirs=_client(vllm_server.base_url),
        ours=_client(worker.base_url),
        theirs_http=httpx.AsyncClient(base_url=vllm_server.base_url, timeout=300),
        ours_http=httpx.AsyncClient(base_url=worker.base_url, timeout=300),
    )
    yield clients
    for client in (clients.theirs, clients.ours):
        await client.close()
    for http in (clients.theirs_http, clients.ours_http):
        await http.aclose()
