"""The tiny LLaVA served three ways, started once per session: our worker (the server over an
EngineCoreLlm), vLLM's own OpenAI server, and our router over the worker (the server over a RemoteLlm).

vLLM's server runs with `vllm_llm.engine_core._vision_compat.child_environment()`: its engine processes are
spawned and need the torchvision-free import hook our worker installs for its own.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.support.engine import TINY_MAX_MODEL_LEN
from tests.support.servers import RunningServer, start_server
from tests.support.vllm_server import vllm_server
from vllm_frontend_testing.processes import ServerProcess

#: Media limits of the servers under test (vLLM's flags): two images per prompt.
LIMIT = 2
#: The router's media limits (vLLM's environment variables): 200x200 pixels, one one-second fetch attempt.
ROUTER_MEDIA_ENV = {
    "VLLM_MAX_IMAGE_PIXELS": "40000",
    "VLLM_IMAGE_FETCH_TIMEOUT": "1",
    "VLLM_MEDIA_FETCH_MAX_RETRIES": "1",
}


@pytest.fixture(scope="session")
def llava_dir(tiny_model_dir: Path) -> Path:
    """The tiny LLaVA (built beside the tiny Llama, once)."""
    from vllm_frontend_testing.tiny_model import build_tiny_llava

    return build_tiny_llava(tiny_model_dir)


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory `file:` media may come from (--allowed-local-media-path)."""
    return tmp_path_factory.mktemp("media")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def llava_worker(llava_dir: Path, media_dir: Path) -> AsyncIterator[RunningServer]:
    """Our worker over the tiny LLaVA."""
    from vllm_llm import EngineCoreSettings
    from vllm_server.config import EngineCoreConfig, ServerConfig
    from vllm_server.source import LlmSource

    config = ServerConfig(
        port=0,
        grpc_port=0,
        served_model_name=("llava",),
        shutdown_grace_period=5,
        limit_mm_per_prompt={"image": LIMIT},
        allowed_local_media_path=str(media_dir),
    )
    settings = EngineCoreSettings(
        model=str(llava_dir),
        served_model_name="llava",
        dtype="float32",
        max_model_len=TINY_MAX_MODEL_LEN,
        engine_args={"limit_mm_per_prompt": {"image": LIMIT}},
    )
    running = await start_server(config, LlmSource.engine_core(EngineCoreConfig(settings=settings)))
    yield running
    await running.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def llava_vllm(
    llava_worker: RunningServer, llava_dir: Path, media_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerProcess]:
    """vLLM's own server over the tiny LLaVA, launched once our worker is ready."""
    from vllm_llm.engine_core._vision_compat import child_environment

    async with vllm_server(
        llava_dir,
        *("--dtype", "float32", "--max-model-len", str(TINY_MAX_MODEL_LEN), "--seed", "0"),
        *("--limit-mm-per-prompt", f'{{"image": {LIMIT}}}', "--allowed-local-media-path", str(media_dir)),
        served_model_name="llava",
        name="vLLM's LLaVA server",
        log_dir=tmp_path_factory.mktemp("vllm_llava"),
        env=child_environment(),
    ) as server:
        yield server


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def llava_router(llava_worker: RunningServer, media_dir: Path) -> AsyncIterator[RunningServer]:
    """Our router over the LLaVA worker: media are loaded and processed here, features cross gRPC."""
    from vllm_remote_llm import RemoteLlm
    from vllm_server.config import ServerConfig
    from vllm_server.source import LlmSource

    remote = await RemoteLlm.connect(llava_worker.grpc_target)
    # vLLM's media limits come from its environment, read when the chat layer is built (at start): a
    # small pixel limit and fetch timeout for the bad-media tests.
    saved = {k: os.environ.get(k) for k in ROUTER_MEDIA_ENV}
    os.environ.update(ROUTER_MEDIA_ENV)
    config = ServerConfig(
        port=0,
        grpc_port=None,
        limit_mm_per_prompt={"image": LIMIT},
        allowed_local_media_path=str(media_dir),
        allowed_media_domains=("127.0.0.1",),
    )
    try:
        running = await start_server(config, LlmSource.provided(remote))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    yield running
    await running.stop()
    await remote.shutdown()
