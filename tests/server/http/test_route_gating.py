"""Engine-core routes exist only over an engine core the server owns; probes follow the Llm."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from vllm_llm import EngineCoreLlm, MockLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource, ProvidedEngineCoreLlm

ENGINE_CORE_ROUTES = [
    ("POST", "/reset_prefix_cache"),
    ("POST", "/sleep"),
    ("POST", "/wake_up"),
    ("GET", "/is_sleeping"),
    ("POST", "/pause"),
    ("POST", "/resume"),
    ("GET", "/is_paused"),
    ("POST", "/abort_requests"),
    ("POST", "/collective_rpc"),
    ("POST", "/checkpoint_prepare"),
    ("POST", "/checkpoint_restore"),
    ("POST", "/v1/load_lora_adapter"),
    ("POST", "/v1/unload_lora_adapter"),
    ("GET", "/kv_event_sources"),
]


@pytest_asyncio.fixture
async def mock_server(tiny_model_dir: Path) -> AsyncIterator[tuple[RunningServer, MockLlm]]:
    """The full server over a provided MockLlm, with every engine-core flag on."""
    llm = tiny_mock(tiny_model_dir)
    running = await start_server(
        ServerConfig(port=0, grpc_port=0, dev_mode=True, enable_runtime_lora=True), LlmSource.provided(llm)
    )
    yield running, llm
    await running.stop()
    await llm.shutdown()


async def test_engine_core_routes_are_404_over_a_provided_llm(
    mock_server: tuple[RunningServer, MockLlm],
) -> None:
    running, _ = mock_server
    async with httpx.AsyncClient(base_url=running.base_url) as http:
        for method, path in ENGINE_CORE_ROUTES:
            response = await http.request(method, path, json={})
            assert response.status_code == 404, (method, path)
            assert response.json()["error"]["type"] == "NotFoundError"


async def test_engine_core_routes_exist_over_an_owned_engine(worker: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=worker.base_url) as http:
        assert (await http.get("/is_paused")).json() == {"is_paused": False}
        assert (await http.get("/is_sleeping")).json() == {"is_sleeping": False}
        assert (await http.get("/kv_event_sources")).json() == {}
        assert (await http.post("/reset_prefix_cache")).json() == {"status": "ok"}
        rpc = await http.post("/collective_rpc", json={"method": "check_health"})
        assert rpc.json() == {"results": [None]}
        for method, path in ENGINE_CORE_ROUTES:
            if path in ("/pause", "/sleep", "/resume", "/wake_up"):
                continue  # state-changing: exercised in the readiness test
            response = await http.request(method, path, json={})
            assert response.status_code != 404, (method, path)


async def test_probes_follow_the_llm(mock_server: tuple[RunningServer, MockLlm]) -> None:
    running, llm = mock_server
    async with httpx.AsyncClient(base_url=running.base_url) as http:
        assert (await http.get("/health")).status_code == 200
        assert (await http.get("/ready")).status_code == 200
        llm.pause()
        assert (await http.get("/ready")).status_code == 503
        assert (await http.get("/health")).status_code == 200
        llm.resume()
        assert (await http.get("/ready")).status_code == 200
        llm.fail()
        assert (await http.get("/health")).status_code == 503
        assert (await http.get("/ready")).status_code == 503


async def test_an_unavailable_llm_gives_503(mock_server: tuple[RunningServer, MockLlm]) -> None:
    running, llm = mock_server
    await llm.shutdown()  # every call now raises Unavailable
    async with httpx.AsyncClient(base_url=running.base_url) as http:
        response = await http.post(
            "/v1/completions", json={"model": "tiny", "prompt": "hello", "max_tokens": 3}
        )
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "ServiceUnavailableError"


async def test_pause_over_the_worker_turns_it_unready(worker: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=worker.base_url) as http:
        assert (await http.post("/pause", params={"mode": "keep"})).json() == {"status": "paused"}
        assert (await http.get("/ready")).status_code == 503
        assert (await http.get("/is_paused")).json() == {"is_paused": True}
        assert (await http.post("/resume")).json() == {"status": "resumed"}
        assert (await http.get("/ready")).status_code == 200


def test_a_provided_engine_core_llm_is_rejected(engine_llm: EngineCoreLlm, tiny_model_dir: Path) -> None:
    with pytest.raises(ProvidedEngineCoreLlm, match=r"LlmSource\.engine_core"):
        LlmSource.provided(engine_llm)
    assert LlmSource.provided(tiny_mock(tiny_model_dir)).provided_llm is not None
