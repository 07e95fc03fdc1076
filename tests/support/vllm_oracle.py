"""`VllmOracle`: the client of `tests/support/vllm_oracle_worker.py`, vLLM's `LLM.generate` in a subprocess.

vLLM's offline engine and an async engine-core client in the same process may conflict, so the oracle runs
on its own. It is started on first use (the engine takes ~40 s to start) and its answers are cached.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

_SCRIPT = Path(__file__).with_name("vllm_oracle_worker.py")


class VllmOracle:
    """Ask vLLM for the results of (prompt token ids, SamplingParams kwargs) pairs."""

    def __init__(self, model_dir: Path, max_model_len: int) -> None:
        self._args = [sys.executable, str(_SCRIPT), str(model_dir), str(max_model_len)]
        self._proc: subprocess.Popen[str] | None = None
        self._cache: dict[str, dict[str, Any]] = {}

    def _start(self) -> subprocess.Popen[str]:
        if self._proc is None:
            env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
            self._proc = subprocess.Popen(
                self._args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
            )
            ready = self._read(self._proc)
            if ready != {"ready": True}:
                raise RuntimeError(f"the vLLM oracle did not start: {ready}")
        return self._proc

    @staticmethod
    def _read(proc: subprocess.Popen[str]) -> Any:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the vLLM oracle exited with {proc.wait()}")
        return json.loads(line)

    def generate(self, jobs: list[tuple[list[int], dict[str, Any]]]) -> list[dict[str, Any]]:
        """vLLM's result (a JSON-like RequestOutput) for each job."""
        keys = [json.dumps(job, sort_keys=True) for job in jobs]
        missing = [(k, job) for k, job in zip(keys, jobs, strict=True) if k not in self._cache]
        if missing:
            proc = self._start()
            assert proc.stdin is not None
            request = [{"prompt_token_ids": p, "params": kw} for _, (p, kw) in missing]
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            answers: list[dict[str, Any]] = self._read(proc)
            for (key, _), answer in zip(missing, answers, strict=True):
                self._cache[key] = answer
        return [self._cache[k] for k in keys]

    def close(self) -> None:
        """Stop the subprocess."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
