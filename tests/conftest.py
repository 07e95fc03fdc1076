"""Session-wide fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

if TYPE_CHECKING:
    from vllm_llm.engine_core import EngineCoreLlm, EngineCoreSettings

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny Llama model with its locally trained tokenizer (built once, cached on disk)."""
    from vllm_llm.tiny_model import build_tiny_model

    return build_tiny_model()


TINY_MAX_MODEL_LEN = 512


class VllmOracle:
    """vLLM's own `LLM.generate` in a subprocess (one engine for the whole session)."""

    def __init__(self, model_dir: Path) -> None:
        import subprocess
        import sys

        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tests.oracle.vllm_oracle", str(model_dir), str(TINY_MAX_MODEL_LEN)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[1],
        )
        try:
            ready = self._read()
        except BaseException:
            self._proc.kill()
            self._proc.wait()
            raise
        assert ready == {"ready": True}, ready

    def _read(self) -> Any:
        import json

        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the vLLM oracle exited with {self._proc.wait()}")
        return json.loads(line)

    def generate(self, prompts: list[list[int]], params: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """vLLM's results for each prompt with its SamplingParams kwargs."""
        import json

        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps({"prompts": prompts, "params": params}) + "\n")
        self._proc.stdin.flush()
        results: list[dict[str, Any]] = self._read()
        return results

    def close(self) -> None:
        """Stop the subprocess."""
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()
        try:
            self._proc.wait(timeout=60)
        except Exception:
            self._proc.kill()
            self._proc.wait()


@pytest.fixture(scope="session")
def vllm_oracle(tiny_model_dir: Path) -> Iterator[VllmOracle]:
    """vLLM's `LLM.generate` on the tiny model, as a test oracle."""
    oracle = VllmOracle(tiny_model_dir)
    yield oracle
    oracle.close()


def tiny_engine_settings(model_dir: Path, **overrides: Any) -> EngineCoreSettings:
    """Engine settings for the tiny model, as every engine-backed test uses them."""
    from vllm_llm.engine_core import EngineCoreSettings

    base: dict[str, Any] = {
        "model": str(model_dir),
        "served_model_name": "tiny",
        "dtype": "float32",
        "max_model_len": TINY_MAX_MODEL_LEN,
        "enable_lora": True,
        "max_lora_rank": 8,
        "max_loras": 2,
        "log_stats": True,
        "enable_prompt_embeds": True,
    }
    return EngineCoreSettings(**(base | overrides))


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def engine_llm(tiny_model_dir: Path) -> AsyncIterator[EngineCoreLlm]:
    """One EngineCoreLlm over the tiny model for the whole session."""
    from vllm_llm.engine_core import EngineCoreLlm

    llm = EngineCoreLlm(tiny_engine_settings(tiny_model_dir))
    await llm.start()
    yield llm
    await llm.shutdown()
