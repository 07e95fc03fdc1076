"""Engine-core routes exist only over an engine core the server owns; probes follow the Llm."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.support.engine_recorder import EngineRecorder
from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from vllm_frontend_testing.tiny_model import build_tiny_lora
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


async def _json(http: httpx.AsyncClient, method: str, path: str, **kw: Any) -> Any:
    response = await http.request(method, path, **kw)
    assert response.status_code == 200, (method, path, response.text)
    return response.json()


async def test_engine_core_routes_answer_over_an_owned_engine(worker: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        assert await _json(http, "GET", "/is_paused") == {"is_paused": False}
        assert await _json(http, "GET", "/is_sleeping") == {"is_sleeping": False}
        assert await _json(http, "GET", "/kv_event_sources") == {}
        assert await _json(http, "POST", "/reset_prefix_cache") == {"status": "ok"}
        rpc = await _json(http, "POST", "/collective_rpc", json={"method": "check_health"})
        assert rpc == {"results": [None]}
        # An empty list would abort every caller's requests: refused.
        empty = await http.post("/abort_requests", json={"request_ids": []})
        assert empty.status_code == 400, empty.text
        assert empty.json()["error"]["type"] == "BadRequestError"


async def test_abort_requests_ends_the_named_stream(worker: RunningServer) -> None:
    body = {
        "model": "tiny",
        "prompt": "hello",
        "max_tokens": 400,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    # Start the stream, wait for its first chunk, then abort it by its engine request id.
    async with (
        httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http,
        http.stream("POST", "/v1/completions", json=body, headers={"X-Request-Id": "gate-abort"}) as stream,
    ):
        assert stream.status_code == 200
        lines = stream.aiter_lines()
        while not (await anext(lines)).startswith("data: "):
            pass
        aborted = await _json(http, "POST", "/abort_requests", json={"request_ids": ["cmpl-gate-abort-0"]})
        assert aborted == {"status": "aborted", "aborted": 1}
        chunks = [json.loads(x[6:]) async for x in lines if x.startswith("data: {")]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "abort"
    assert chunks[-1]["usage"]["completion_tokens"] < 400


async def test_sleep_and_wake_up_over_the_worker(worker: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        assert await _json(http, "POST", "/sleep", params={"level": 1}) == {"status": "sleeping", "level": 1}
        assert await _json(http, "GET", "/is_sleeping") == {"is_sleeping": True}
        assert (await http.get("/ready")).status_code == 503
        assert await _json(http, "POST", "/wake_up") == {"status": "awake", "tags": None}
        assert await _json(http, "GET", "/is_sleeping") == {"is_sleeping": False}
        assert (await http.get("/ready")).status_code == 200
        done = await _json(http, "POST", "/v1/completions", json={"prompt": "hello", "max_tokens": 3})
        assert done["usage"]["completion_tokens"] == 3


async def test_checkpoint_prepare_and_restore(worker: RunningServer) -> None:
    greedy = {"prompt": "The cat", "max_tokens": 8, "temperature": 0, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        before = await _json(http, "POST", "/v1/completions", json=greedy)
        assert await _json(http, "POST", "/checkpoint_prepare") == {"status": "prepared"}
        assert await _json(http, "POST", "/checkpoint_restore") == {"status": "restored"}
        after = await _json(http, "POST", "/v1/completions", json=greedy)
    # The restored engine serves, and serves the same model: greedy output is unchanged.
    assert after["choices"][0]["text"] == before["choices"][0]["text"]
    assert after["usage"]["completion_tokens"] == 8


async def test_lora_adapter_routes_load_serve_and_unload(
    worker: RunningServer, tiny_model_dir: Path, engine_recorder: EngineRecorder
) -> None:
    path = str(build_tiny_lora(tiny_model_dir))
    greedy = {"prompt": "The cat", "max_tokens": 8, "temperature": 0, "ignore_eos": True}
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        loaded = await http.post("/v1/load_lora_adapter", json={"lora_name": "gate-lora", "lora_path": path})
        assert loaded.status_code == 200, loaded.text
        assert loaded.text == "Success: LoRA adapter 'gate-lora' added successfully."
        models = await _json(http, "GET", "/v1/models")
        assert "gate-lora" in [m["id"] for m in models["data"]]
        base = await _json(http, "POST", "/v1/completions", json={"model": "tiny", **greedy})
        adapted = await _json(
            http,
            "POST",
            "/v1/completions",
            json={"model": "gate-lora", **greedy},
            headers={"X-Request-Id": "gate-lora-generate"},
        )
        assert adapted["model"] == "gate-lora"
        assert adapted["choices"][0]["text"] != base["choices"][0]["text"]  # the adapter changes the output
        lora = engine_recorder.received_one("cmpl-gate-lora-generate-0").lora_request
        assert (lora.lora_name, lora.lora_path, lora.is_3d_lora_weight) == ("gate-lora", path, False)
        unloaded = await http.post("/v1/unload_lora_adapter", json={"lora_name": "gate-lora"})
        assert unloaded.status_code == 200, unloaded.text
        assert unloaded.text == "Success: LoRA adapter 'gate-lora' removed successfully."
        gone = await http.post("/v1/completions", json={"model": "gate-lora", **greedy})
        assert gone.status_code == 404, gone.text
        again = await http.post("/v1/unload_lora_adapter", json={"lora_name": "gate-lora"})
        assert again.status_code == 404, again.text


async def test_a_3d_lora_adapter_is_requested_as_one(
    worker: RunningServer, tiny_model_dir: Path, engine_recorder: EngineRecorder
) -> None:
    """`is_3d_lora_weight` (a fused 3D MoE adapter, vLLM's load field) reaches the engine with every
    request for the adapter, as vLLM's LoRARequest carries it, and the worker's Info tells a router."""
    path = str(build_tiny_lora(tiny_model_dir))
    load = {"lora_name": "lora-3d", "lora_path": path, "is_3d_lora_weight": True}
    greedy = {"model": "lora-3d", "prompt": "The cat", "max_tokens": 2, "temperature": 0}
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        loaded = await http.post("/v1/load_lora_adapter", json=load)
        assert loaded.status_code == 200, loaded.text
        try:
            served = {a.name: a for a in worker.state.served_info().lora_adapters or ()}
            assert served["lora-3d"].is_3d_lora_weight is True
            headers = {"X-Request-Id": "lora-3d-generate"}
            assert (await http.post("/v1/completions", json=greedy, headers=headers)).status_code == 200
            lora = engine_recorder.received_one("cmpl-lora-3d-generate-0").lora_request
            assert (lora.lora_name, lora.is_3d_lora_weight) == ("lora-3d", True)
        finally:
            unloaded = await http.post("/v1/unload_lora_adapter", json={"lora_name": "lora-3d"})
            assert unloaded.status_code == 200, unloaded.text


async def test_lora_adapter_load_errors_are_vllms(
    worker: RunningServer, tiny_model_dir: Path, tmp_path: Path
) -> None:
    """Each refusal of /v1/load_lora_adapter and /v1/unload_lora_adapter has vLLM 0.32's status, type and
    words (`OpenAIServingModels` in vllm/entrypoints/openai/models/serving.py): its own server tests
    (serve/lora/test_lora_adapters.py) run on ours in `make conformance` too."""
    path = str(build_tiny_lora(tiny_model_dir))
    not_json = tmp_path / "not-json"
    not_json.mkdir()
    (not_json / "adapter_config.json").write_text("this is not json")

    async def error(route: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        response = await http.post(route, json=body)
        return response.status_code, response.json()["error"]

    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        status, body = await error(
            "/v1/load_lora_adapter", {"lora_name": "missing", "lora_path": "/not/an/adapter"}
        )
        assert (status, body["type"]) == (404, "NotFoundError")
        assert body["message"] == "Loading lora missing failed: No adapter found for /not/an/adapter"
        status, body = await error(
            "/v1/load_lora_adapter", {"lora_name": "broken", "lora_path": str(not_json)}
        )
        assert (status, body["type"]) == (500, "InternalServerError")
        assert str(not_json) not in body["message"]  # no path of the machine in an error body
        status, body = await error("/v1/load_lora_adapter", {"lora_name": "", "lora_path": path})
        assert (status, body["type"]) == (400, "InvalidUserInput")
        assert body["message"] == "Both 'lora_name' and 'lora_path' must be provided."
        status, body = await error("/v1/load_lora_adapter", {"lora_name": "tiny", "lora_path": path})
        assert (status, body["message"]) == (
            400,
            "The lora adapter 'tiny' conflicts with a served base model.",
        )
        loaded = await http.post("/v1/load_lora_adapter", json={"lora_name": "twice", "lora_path": path})
        assert loaded.status_code == 200, loaded.text
        try:
            status, body = await error("/v1/load_lora_adapter", {"lora_name": "twice", "lora_path": path})
            assert (status, body["type"]) == (400, "InvalidUserInput")
            assert body["message"] == (
                "The lora adapter 'twice' has already been loaded. If you want to load the adapter in place, "
                "set 'load_inplace' to True."
            )
            again = await http.post(
                "/v1/load_lora_adapter", json={"lora_name": "twice", "lora_path": path, "load_inplace": True}
            )
            assert again.status_code == 200, again.text
        finally:
            assert (
                await http.post("/v1/unload_lora_adapter", json={"lora_name": "twice"})
            ).status_code == 200
        status, body = await error("/v1/unload_lora_adapter", {"lora_name": "twice"})
        assert (status, body["type"]) == (404, "NotFoundError")
        assert body["message"] == "The lora adapter 'twice' cannot be found."
        status, body = await error("/v1/unload_lora_adapter", {"lora_name": ""})
        assert (status, body["type"]) == (400, "InvalidUserInput")
        assert body["message"] == "'lora_name' needs to be provided to unload a LoRA adapter."
        # Nothing of the refused loads is served.
        models = [m["id"] for m in (await http.get("/v1/models")).json()["data"]]
        assert not {"missing", "broken", "twice"} & set(models)


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
