"""LoRA adapters through a router: the worker's `LlmInfo` names the adapters it serves (static and loaded
at runtime); the router lists them in `/v1/models`, applies them by model name and follows the worker's
changes. A router refuses the engine's adapter flags at start-up."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.support.engine_recorder import EngineRecorder
from tests.support.servers import RunningServer, start_server
from vllm_frontend_testing.tiny_model import build_tiny_lora
from vllm_remote_llm import RemoteLlm
from vllm_server.cli import serve_config
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

GREEDY = {"prompt": "The cat", "max_tokens": 8, "temperature": 0, "ignore_eos": True}


@pytest_asyncio.fixture(loop_scope="session")
async def router(worker: RunningServer) -> AsyncIterator[RunningServer]:
    remote = await RemoteLlm.connect(worker.grpc_target)
    running = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(remote))
    yield running
    await running.stop()
    await remote.shutdown()


async def _post(
    http: httpx.AsyncClient, path: str, body: dict[str, Any], request_id: str | None = None
) -> dict[str, Any]:
    response = await http.post(path, json=body, headers={"X-Request-Id": request_id} if request_id else None)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


async def _model_ids(http: httpx.AsyncClient) -> list[str]:
    return [m["id"] for m in (await http.get("/v1/models")).json()["data"]]


@pytest.mark.asyncio(loop_scope="session")
async def test_the_router_lists_serves_and_follows_the_workers_adapters(
    worker: RunningServer,
    router: RunningServer,
    tiny_model_dir: Path,
    engine_recorder: EngineRecorder,
) -> None:
    path = str(build_tiny_lora(tiny_model_dir, seed=3))
    async with (
        httpx.AsyncClient(base_url=worker.base_url, timeout=120) as at_worker,
        httpx.AsyncClient(base_url=router.base_url, timeout=120) as at_router,
    ):
        assert "router-lora" not in await _model_ids(at_router)
        loaded = await at_worker.post(
            "/v1/load_lora_adapter", json={"lora_name": "router-lora", "lora_path": path}
        )
        assert loaded.status_code == 200, loaded.text
        try:
            # a request naming the new adapter is served at once: the router re-reads before a 404
            routed = await _post(
                at_router, "/v1/completions", {"model": "router-lora", **GREEDY}, "routed-lora"
            )
            assert "router-lora" in await _model_ids(at_router)
            card = next(
                m for m in (await at_router.get("/v1/models")).json()["data"] if m["id"] == "router-lora"
            )
            assert (card["root"], card["parent"]) == (path, "tiny")
            direct = await _post(at_worker, "/v1/completions", {"model": "router-lora", **GREEDY})
            base = await _post(at_router, "/v1/completions", {"model": "tiny", **GREEDY})
            assert routed["choices"][0]["text"] == direct["choices"][0]["text"] != base["choices"][0]["text"]
            assert routed["model"] == "router-lora"
            lora = engine_recorder.received_one("cmpl-routed-lora-0").lora_request
            assert (lora.lora_name, lora.lora_path) == ("router-lora", path)
        finally:
            unloaded = await at_worker.post("/v1/unload_lora_adapter", json={"lora_name": "router-lora"})
            assert unloaded.status_code == 200, unloaded.text
        assert "router-lora" not in await _model_ids(at_router)
        gone = await at_router.post("/v1/completions", json={"model": "router-lora", **GREEDY})
        assert gone.status_code == 404, gone.text


@pytest.mark.parametrize("flags", [["--lora-modules", "a=/loras/a"], ["--enable-runtime-lora"]])
def test_a_router_refuses_the_frontends_adapter_flags(flags: list[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        serve_config(["--remote", "127.0.0.1:1", *flags])
    assert flags[0] in str(stopped.value) and "a router serves the adapters its workers serve" in str(
        stopped.value
    )


@pytest.mark.parametrize("flags", [["--enable-lora"], ["--max-loras", "4"], ["--max-lora-rank", "64"]])
def test_a_router_refuses_the_engines_adapter_flags(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM's engine flags are not a router's (a usage error, as for any engine flag)."""
    with pytest.raises(SystemExit) as stopped:
        serve_config(["--remote", "127.0.0.1:1", *flags])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert f"unrecognized arguments: {' '.join(flags)}" in error and "configure a worker's engine" in error


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--model", "/m", "--routing", "prefix"], "pick among --remote workers"),
        (["--remote", "127.0.0.1:1", "--prefix-blocks", "8"], "applies to --routing prefix only"),
        (["--model", "/m", "--remote-prefill", "127.0.0.1:1"], "--remote-prefill needs --remote"),
    ],
)
def test_routing_flags_that_would_do_nothing_are_refused(flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        serve_config(flags)
    assert message in str(stopped.value)


def test_a_workers_kv_transfer_config_reaches_its_engine() -> None:
    kv = '{"kv_connector": "NixlConnector", "kv_role": "kv_both", "kv_buffer_device": "cpu"}'
    config = serve_config(["--model", "/m", "--kv-transfer-config", kv])
    assert config.engine_core is not None
    transfer = config.engine_core.settings.engine_args["kv_transfer_config"]
    assert {key: getattr(transfer, key) for key in json.loads(kv)} == json.loads(kv)
