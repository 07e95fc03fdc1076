"""`--fingerprint-mode` and `--fingerprint-value`: each mode's `system_fingerprint` as vLLM's own
`build_system_fingerprint` makes it from the same engine facts, and on processes as a user starts them: a
router stamps its worker's engine's fingerprint (from LlmInfo, without vLLM), the mock none but a custom
one. The default mode against vLLM's own server: tests/differential/test_fingerprint.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.support.servers import RunningServer
from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import Frontend
from vllm_llm import EngineCoreLlm
from vllm_llm.wire import LlmInfo
from vllm_server.http.openai import system_fingerprint


@dataclass
class _Parallel:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    enable_expert_parallel: bool = False


@dataclass
class _Config:
    """What vLLM's build_system_fingerprint reads of a VllmConfig."""

    parallel_config: _Parallel
    hash: str | None = "0123456789abcdef"

    def compute_hash(self) -> str:
        if self.hash is None:
            raise RuntimeError("no hash")
        return self.hash


PARALLEL = [
    _Parallel(),
    _Parallel(2),
    _Parallel(1, 3),
    _Parallel(1, 1, 2),
    _Parallel(enable_expert_parallel=True),
]
PARALLEL.append(_Parallel(2, 2, 2, True))


@pytest.mark.parametrize("mode", ["full", "hash", "custom", "none"])
@pytest.mark.parametrize("parallel", PARALLEL, ids=lambda p: "-".join(map(str, vars(p).values())))
@pytest.mark.parametrize("config_hash", ["0123456789abcdef", None])
def test_each_mode_is_vllms(
    mode: Any, parallel: _Parallel, config_hash: str | None, tiny_info: LlmInfo
) -> None:
    import vllm
    from vllm.entrypoints.serve.utils.fingerprint import build_system_fingerprint

    info = msgspec.structs.replace(
        tiny_info,
        vllm_version=vllm.__version__,
        config_hash=config_hash,
        **vars(parallel),
    )
    theirs = build_system_fingerprint(_Config(parallel, config_hash), mode, "my-fingerprint")
    assert system_fingerprint(info, mode, "my-fingerprint") == theirs


def test_no_vllm_no_fingerprint(tiny_info: LlmInfo) -> None:
    info = msgspec.structs.replace(tiny_info, vllm_version=None)
    assert system_fingerprint(info, "full", None) is None
    assert system_fingerprint(info, "custom", "mine") == "mine"


async def _fingerprints(front: Frontend) -> list[Any]:
    async with httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE) as http:
        chat = {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
        cmpl = {"model": "tiny", "prompt": "Hi", "max_tokens": 2}
        bodies = [
            (await http.post("/v1/chat/completions", json=chat)).json(),
            (await http.post("/v1/completions", json=cmpl)).json(),
        ]
        assert all("system_fingerprint" in body for body in bodies), bodies
        return [body["system_fingerprint"] for body in bodies]


async def test_a_router_stamps_its_workers_fingerprint(
    worker: RunningServer, engine_llm: EngineCoreLlm
) -> None:
    from vllm.entrypoints.serve.utils.fingerprint import build_system_fingerprint

    config = engine_llm._vllm_config
    for mode in ("full", "hash"):
        front = await Frontend.start(
            "--remote", worker.grpc_target, "--grpc-port", "-1", "--fingerprint-mode", mode
        )
        try:
            await front.wait_serving()
            assert await _fingerprints(front) == [build_system_fingerprint(config, mode)] * 2
        finally:
            await front.stop(10)


async def test_the_mock_stamps_a_custom_one_only(tiny_model_dir: Path) -> None:
    mock = ("--mock", "--tokenizer", str(tiny_model_dir), "--grpc-port", "-1", "--served-model-name", "tiny")
    for flags, expected in [
        ((), None),
        (("--fingerprint-mode", "custom", "--fingerprint-value", "v1"), "v1"),
    ]:
        front = await Frontend.start(*mock, *flags)
        try:
            await front.wait_serving()
            assert await _fingerprints(front) == [expected] * 2
        finally:
            await front.stop(10)
