"""`vllm-frontend serve` processes on loopback: start, signal, kill, restart on the same ports."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

EXE = str(Path(sys.executable).with_name("vllm-frontend"))
_LISTENING = re.compile(r"listening: HTTP on [\d.]+:(\d+), gRPC on (\w+)")


@dataclass
class Frontend:
    """One `vllm-frontend serve` process, the ports it reported, and its log."""

    args: tuple[str, ...]
    proc: asyncio.subprocess.Process | None = None
    http_port: int = 0
    grpc_port: int | None = None
    log: list[str] = field(default_factory=list)
    _reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls, *args: str, http_port: int = 0) -> Frontend:
        """Start `vllm-frontend serve --port HTTP_PORT ARGS...` and wait until it listens."""
        front = cls(args)
        await front._spawn(http_port)
        return front

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_target(self) -> str:
        """`127.0.0.1:PORT`."""
        return f"127.0.0.1:{self.grpc_port}"

    async def _spawn(self, http_port: int) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            EXE, "serve", "--port", str(http_port), *self.args, stderr=asyncio.subprocess.PIPE
        )
        assert self.proc.stderr is not None
        while True:
            raw = await asyncio.wait_for(self.proc.stderr.readline(), 120)
            if not raw:
                raise RuntimeError("the frontend exited before listening:\n" + "\n".join(self.log[-30:]))
            line = raw.decode(errors="replace").rstrip()
            self.log.append(line)
            m = _LISTENING.search(line)
            if m:
                self.http_port = int(m.group(1))
                self.grpc_port = int(m.group(2)) if m.group(2).isdigit() else None
                break
        self._reader = asyncio.create_task(self._read_rest(self.proc))

    async def _read_rest(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        async for raw in proc.stderr:
            self.log.append(raw.decode(errors="replace").rstrip())

    def signal(self, sig: signal.Signals) -> None:
        """Send `sig` to the process."""
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def wait(self, within: float = 60) -> int:
        """Wait for the process to exit; its exit code."""
        assert self.proc is not None
        code = await asyncio.wait_for(self.proc.wait(), within)
        if self._reader is not None:
            await self._reader
        return code

    async def kill(self) -> None:
        """SIGKILL, then reap."""
        self.signal(signal.SIGKILL)
        await self.wait()

    async def restart(self) -> None:
        """Start the same command again on the same HTTP and gRPC ports (after it died)."""
        assert self.proc is not None and self.proc.returncode is not None
        args = list(self.args)
        if "--grpc-port" in args and self.grpc_port is not None:
            args[args.index("--grpc-port") + 1] = str(self.grpc_port)
        self.args = tuple(args)
        await self._spawn(self.http_port)

    async def stop(self) -> None:
        """SIGCONT (in case it is stopped), SIGTERM, then wait; a no-op once it exited."""
        if self.proc is None or self.proc.returncode is not None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            await self.wait(60)
        except TimeoutError:
            await self.kill()


async def mock_worker(*extra: str) -> Frontend:
    """A `--mock` worker (MockLlm stepping every 10 ms) with gRPC on an ephemeral port."""
    return await Frontend.start("--mock", "--grpc-port", "0", "--served-model-name", "tiny", *extra)


async def router_over(workers: list[Frontend], tokenizer: Path, *extra: str) -> Frontend:
    """A `--remote ipv4:...` router over `workers`, without a gRPC port of its own."""
    target = "ipv4:" + ",".join(w.grpc_target for w in workers)
    return await Frontend.start(
        "--remote",
        target,
        "--grpc-port",
        "-1",
        "--tokenizer",
        str(tokenizer),
        "--served-model-name",
        "tiny",
        *extra,
    )


async def until(check: Callable[[], Awaitable[bool]], *, within: float, what: str) -> None:
    """Bounded polling, for state only visible from outside a process (nothing to watch there)."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {within} s")
        await asyncio.sleep(0.05)


async def status_of(http: httpx.AsyncClient, path: str) -> int:
    """The status of GET `path` (0 when the connection fails)."""
    try:
        return (await http.get(path)).status_code
    except httpx.TransportError:
        return 0
