"""Server processes on loopback: start one, wait until it serves, signal, kill, restart and stop it.

`ServerProcess` is any server command (a benchmark also runs vLLM's own server), started by
`start_server`, which waits until an HTTP path answers 200. `Frontend` is `vllm-frontend serve`, started
by `Frontend.start`, which learns its ports from the line the server logs once it listens: it can start
on ephemeral ports and `restart` on the same ones. Every process leads its own process group, so `stop`
and `kill` reach what it started too (a worker's engine-core processes); its output (stdout and stderr)
is kept in `log` and, given a `log_path`, written there.

`stop` ends whatever is left and says how the process exited; a test that means "it drains and exits
cleanly" signals the process and then awaits `exits_cleanly`, which fails (with the log's tail) on a
non-zero exit, on a process that had to be killed, and on one that left a process of its group behind.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import re
import signal
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from signal import Signals
from typing import BinaryIO
from urllib.parse import urlsplit

#: What `vllm-frontend serve` logs once it listens: its HTTP port, and its gRPC port or `None`.
_LISTENING = re.compile(r"listening: HTTP on (?:[\d.]+:(\d+)|unix:(\S+)), gRPC on (\w+)")
#: Lines of output kept in memory (the whole of it goes to the log file, when there is one).
_KEPT_LINES = 2000
#: Longest output line read whole (vLLM logs its whole config on one line).
_LINE_LIMIT = 1 << 20
#: How long a server may take to come up: on a loaded machine importing vLLM alone can take minutes.
STARTUP_WITHIN = 300.0


def frontend_argv(*args: str) -> list[str]:
    """The argv of `vllm-frontend ARGS` run by this interpreter."""
    return [sys.executable, "-m", "vllm_server.cli", *args]


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """A server command on loopback, leading its own process group; its recent output in `log`."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        http_port: int = 0,
        log_path: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = tuple(argv)
        self.env = dict(env) if env is not None else None
        self.http_port = http_port
        self.log_path = log_path
        self.log: collections.deque[str] = collections.deque(maxlen=_KEPT_LINES)
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`."""
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def pid(self) -> int:
        """The process id (also the id of its process group)."""
        assert self.proc is not None
        return self.proc.pid

    def log_tail(self, lines: int = 30) -> str:
        """The last `lines` lines of its output."""
        return "\n".join(list(self.log)[-lines:])

    async def _spawn(self, expect: re.Pattern[str] | None = None) -> asyncio.Future[re.Match[str]] | None:
        """Start `argv`; with `expect`, a future of the first output line that matches it."""
        log_file = _open_log(self.log_path, append=self.proc is not None) if self.log_path else None
        env = dict(os.environ if self.env is None else self.env)
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # vLLM's CPU backend reserves 4 GiB otherwise
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env,
            process_group=0, limit=_LINE_LIMIT,
        )  # fmt: skip
        if expect is None:
            self._reader = asyncio.create_task(self._read(self.proc, log_file, None))
            return None
        expected: asyncio.Future[re.Match[str]] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read(self.proc, log_file, (expect, expected)))
        return expected

    async def _read(
        self,
        proc: asyncio.subprocess.Process,
        log_file: BinaryIO | None,
        expect: tuple[re.Pattern[str], asyncio.Future[re.Match[str]]] | None,
    ) -> None:
        """Keep the output (in `log` and the log file) until it ends; resolve `expect` on the way."""
        assert proc.stdout is not None
        try:
            async for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip()
                self.log.append(line)
                if log_file is not None:
                    log_file.write(raw)
                if expect is not None and not expect[1].done():
                    match = expect[0].search(line)
                    if match is not None:
                        expect[1].set_result(match)
        finally:
            if log_file is not None:
                log_file.close()
            if expect is not None and not expect[1].done():
                expect[1].set_exception(
                    RuntimeError(
                        f"{self.name} exited before it logged {expect[0].pattern!r}; its log ends:\n"
                        + self.log_tail()
                    )
                )

    async def _wait_ready(self, path: str, within: float) -> None:
        """Wait until GET `path` answers 200 (stopping the process if it does not)."""

        async def ready() -> bool:
            if self.proc is not None and self.proc.returncode is not None:
                raise RuntimeError(f"{self.name} exited before it answered 200 on {path}")
            return await answers_200(self.base_url, path)

        try:
            await until(ready, within=within, what=f"{self.name} answering 200 on {path}")
        except (AssertionError, RuntimeError) as exc:
            await self.stop(5)
            raise RuntimeError(f"{exc}; its log ends:\n{self.log_tail()}") from None

    def signal(self, sig: Signals) -> None:
        """Send `sig` to the process (not its group)."""
        assert self.proc is not None
        self.proc.send_signal(sig)

    async def wait(self, within: float = 60) -> int:
        """Wait for the process to exit and its output to end; its exit code."""
        assert self.proc is not None
        code = await asyncio.wait_for(self.proc.wait(), within)
        if self._reader is not None:
            await asyncio.wait_for(self._reader, within)  # a child left in the group may hold the pipe
        return code

    async def kill(self) -> None:
        """SIGKILL its process group, then reap it, and give what it started (reaped by init) the moment a
        killed process takes to end on a loaded machine (CI: one was still there right after)."""
        self._signal_group(signal.SIGKILL)
        await self.wait()

        async def gone() -> bool:
            return not self.processes_left()

        with contextlib.suppress(AssertionError):  # one still there: what the caller checks says so
            await until(gone, within=10, what=f"the processes {self.name} started ending")

    async def stop(self, grace: float = 60) -> int | None:
        """SIGCONT (if it is stopped) and SIGTERM its group, SIGKILL after `grace` s; its exit code (negative:
        the signal that ended it; None: never started). Once it exited: SIGKILL what it left behind."""
        if self.proc is None:
            return None
        if self.proc.returncode is None:
            self._signal_group(signal.SIGCONT)
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), grace)
            self._signal_group(signal.SIGKILL)  # what is left: all of it after `grace`, else stray children
        elif self.processes_left():  # (a group with no process left may be another one's by now)
            self._signal_group(signal.SIGKILL)
        return await self.wait()

    async def exits_cleanly(self, within: float) -> None:
        """Assert that it exits 0 within `within` s (of having been asked to: SIGTERM, SIGINT) and leaves no
        process of its group behind (a worker's engine core); else kill the group and raise
        AssertionError with the log's tail."""
        assert self.proc is not None
        proc = self.proc

        async def exited() -> bool:  # not `proc.wait()`: that also waits for every holder of its stdout
            return proc.returncode is not None

        try:
            await until(exited, within=within, what=f"{self.name} exiting")
        except AssertionError:
            await self.kill()
            raise AssertionError(
                f"{self.name} did not exit within {within} s: killed; its log ends:\n{self.log_tail()}"
            ) from None

        async def alone() -> bool:
            return not self.processes_left()

        try:
            await until(alone, within=within, what=f"the processes {self.name} started ending")
        except AssertionError:
            left = _describe(self.processes_left())
            await self.kill()
            raise AssertionError(
                f"{self.name} exited {proc.returncode} but left {left} running: killed; its log ends:\n"
                + self.log_tail()
            ) from None
        code = await self.wait()
        assert code == 0, f"{self.name} exited {code}; its log ends:\n{self.log_tail()}"

    def processes_left(self) -> list[int]:
        """The live processes of its group (it, and what it started that is still running), from /proc."""
        return group_processes(self.pid)

    def _signal_group(self, sig: Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)


class Frontend(ServerProcess):
    """`vllm-frontend serve` on loopback, on the ports it reported once it listened."""

    def __init__(
        self,
        args: Sequence[str],
        *,
        http_port: int = 0,
        log_path: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__("frontend", [], http_port=http_port, log_path=log_path, env=env)
        self.args = tuple(args)
        self.grpc_port: int | None = None
        #: The Unix socket it serves HTTP on (`--uds`), instead of `http_port`.
        self.uds: str | None = None

    @classmethod
    async def start(
        cls,
        *args: str,
        http_port: int = 0,
        within: float = STARTUP_WITHIN,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ) -> Frontend:
        """Start `vllm-frontend serve --port HTTP_PORT ARGS...` and wait until it listens; `env`: its
        environment (default: this process's); `log_path`: a file for the whole of its output (`log`
        keeps the last lines only)."""
        front = cls(args, http_port=http_port, env=env, log_path=log_path)
        await front._start(within)
        return front

    async def wait_serving(self, within: float = STARTUP_WITHIN) -> None:
        """Wait until its model is loaded (`/v1/models` answers 200; a worker's engine takes a while)."""
        await self._wait_ready("/v1/models", within)

    @property
    def grpc_target(self) -> str:
        """`127.0.0.1:PORT`."""
        return f"127.0.0.1:{self.grpc_port}"

    async def _start(self, within: float) -> None:
        self.argv = tuple(frontend_argv("serve", "--port", str(self.http_port), *self.args))
        listening = await self._spawn(_LISTENING)
        assert listening is not None
        try:
            match = await asyncio.wait_for(listening, within)
        except BaseException:
            await self.stop(5)
            raise
        if match.group(1) is not None:
            self.http_port = int(match.group(1))
        self.uds = match.group(2)
        self.grpc_port = int(match.group(3)) if match.group(3).isdigit() else None

    async def restart(self, within: float = STARTUP_WITHIN) -> None:
        """Start the same command again on the same HTTP and gRPC ports (after it exited)."""
        assert self.proc is not None and self.proc.returncode is not None
        args = list(self.args)
        if "--grpc-port" in args and self.grpc_port is not None:
            args[args.index("--grpc-port") + 1] = str(self.grpc_port)
        self.args = tuple(args)
        await self._start(within)


async def start_server(
    name: str,
    argv: Sequence[str],
    *,
    http_port: int,
    ready_path: str,
    log_path: Path | None = None,
    within: float = STARTUP_WITHIN,
    env: Mapping[str, str] | None = None,
) -> ServerProcess:
    """Start `argv` (a server on loopback port `http_port`) and wait until GET `ready_path` answers 200;
    `env`: its environment (default: this process's)."""
    server = ServerProcess(name, argv, http_port=http_port, log_path=log_path, env=env)
    await server._spawn()
    await server._wait_ready(ready_path, within)
    return server


async def mock_worker(*extra: str) -> Frontend:
    """A `--mock` worker (MockLlm stepping every 10 ms) with gRPC on an ephemeral port."""
    return await Frontend.start("--mock", "--grpc-port", "0", "--served-model-name", "tiny", *extra)


async def router_over(workers: Sequence[Frontend], tokenizer: Path, *extra: str) -> Frontend:
    """A `--remote ipv4:...` router over `workers`, without a gRPC port of its own."""
    target = "ipv4:" + ",".join(w.grpc_target for w in workers)
    return await Frontend.start(
        "--remote", target, "--grpc-port", "-1", "--tokenizer", str(tokenizer), "--served-model-name", "tiny",
        *extra,
    )  # fmt: skip


async def until(check: Callable[[], Awaitable[bool]], *, within: float, what: str) -> None:
    """Bounded polling, for state only visible from outside a process (nothing to watch there)."""
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {within} s")
        await asyncio.sleep(0.05)


async def answers_200(base_url: str, path: str) -> bool:
    """Whether GET `path` at `base_url` answers 200 now (a raw request: no HTTP client needed)."""
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


def group_processes(pgid: int) -> list[int]:
    """The live processes of process group `pgid` (zombies are dead: only their parent's wait is left)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        fields = _stat_fields(stat)
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(stat.parent.name))
    return sorted(found)


def process_name(pid: int) -> str | None:
    """The name of process `pid` (its `comm`, e.g. `VLLM::EngineCor`; a zombie has one), None once reaped."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _stat_fields(stat: Path) -> list[str] | None:
    """The fields of a /proc/PID/stat after the command name (state, ppid, pgrp, ...); None if gone."""
    try:
        return stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _describe(pids: Sequence[int]) -> str:
    return ", ".join(f"{pid} ({process_name(pid)})" for pid in pids) or "nothing"


def _open_log(path: Path, *, append: bool) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    # unbuffered: the file holds each line as soon as it is read (a test reads it while the process runs)
    return path.open("ab" if append else "wb", buffering=0)
