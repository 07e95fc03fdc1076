"""Server processes for the benchmarks: start one, wait until it serves, stop it (its whole group).

CPU placement (`engine_cpus`, `spare_cpus`, `pin`): on a CPU-only machine vLLM binds the engine's
OpenMP threads to some CPUs and reserves the rest for everything else; the kernel still schedules other
processes onto the bound CPUs, where they preempt the forward pass. Processes that stand for other hosts
(the load generator, B4's router) are pinned to the spare CPUs, so they cannot steal the engine's CPU
the way they never could on a GPU machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

from vllm_server.affinity import engine_bound_cpus, pin


def engine_cpus(server: ServerProcess) -> frozenset[int]:
    """The CPUs the server's engine processes bound themselves to (empty: none bound).

    Judged against this process's affinity, not the server's: our frontend may already have moved itself
    off the engine's CPUs (`--frontend-affinity`), and it is never counted (only processes below it are).
    """
    return engine_bound_cpus(server.process.pid, within=frozenset(os.sched_getaffinity(os.getpid())))


def spare_cpus(engine: frozenset[int]) -> frozenset[int] | None:
    """The CPUs of this process's affinity outside `engine` (`engine_cpus`); None when no split exists."""
    spare = frozenset(os.sched_getaffinity(os.getpid())) - engine
    return spare if engine and spare else None


@contextlib.contextmanager
def pinned_here(cpus: frozenset[int] | None) -> Iterator[None]:
    """Run this process (the load generator) on `cpus` inside the block; None: leave it alone."""
    if cpus is None:
        yield
        return
    before = frozenset(os.sched_getaffinity(os.getpid()))
    pin(os.getpid(), cpus)
    try:
        yield
    finally:
        pin(os.getpid(), before)


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def frontend_argv(*args: str) -> list[str]:
    """The argv of `vllm-frontend ARGS` run by this interpreter."""
    return [sys.executable, "-m", "vllm_server.cli", *args]


@dataclass
class ServerProcess:
    """A server started by the benchmark, in its own process group."""

    name: str
    process: asyncio.subprocess.Process
    base_url: str
    log_path: Path

    async def stop(self, grace: float = 30.0) -> None:
        """SIGTERM the group, wait up to `grace` s, then SIGKILL it."""
        if self.process.returncode is not None:
            return
        pgid = self.process.pid  # the leader of the process group it was started in
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            await self.process.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)  # children left behind (engine core processes)

    def log_tail(self, lines: int = 30) -> str:
        """The end of the process's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


async def start_server(
    name: str, argv: Sequence[str], *, base_url: str, ready_path: str, log_dir: Path, within: float = 300
) -> ServerProcess:
    """Start `argv` (logging to `log_dir/name.log`) and wait until GET `ready_path` answers 200."""
    log_path = log_dir / f"{name}.log"
    env = dict(os.environ)
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    with _open_log(log_path) as log:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=log, stderr=asyncio.subprocess.STDOUT, env=env, process_group=0
        )
    server = ServerProcess(name, process, base_url, log_path)
    deadline = time.monotonic() + within
    while not await _answers_200(base_url, ready_path):
        if process.returncode is not None or time.monotonic() > deadline:
            await server.stop(5)
            raise RuntimeError(f"{name} did not become ready; its log ends:\n{server.log_tail()}")
        await asyncio.sleep(0.5)
    return server


def _open_log(path: Path) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("wb")


async def _answers_200(base_url: str, path: str) -> bool:
    url = urlsplit(base_url)
    try:
        reader, writer = await asyncio.open_connection(url.hostname, url.port)
    except OSError:
        return False
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\nConnection: close\r\n\r\n".encode())
        line = await asyncio.wait_for(reader.readline(), 10)
        return line.split()[1:2] == [b"200"]
    except (OSError, TimeoutError):
        return False
    finally:
        writer.close()
