"""One README session: a `bash` process that the shell blocks are sourced in, the Python blocks beside it,
the background processes its blocks start, and how it ends (see `tests.readme.collector`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path

import psutil

from tests.readme.collector import Block
from vllm_frontend_testing.processes import until

#: How long a shell block may run: it may start servers over a real engine on a loaded machine.
SHELL_WITHIN = 1200.0
#: How long a Python block may run.
PYTHON_WITHIN = 300.0
#: How long the servers of a session may take to drain and exit after SIGTERM.
STOP_GRACE = 60.0
#: How often the background processes are looked at.
_POLL = 0.25
#: Lines of a log shown with a failure.
TAIL = 60
#: Lines left out of a log tail: the readiness polls of the README's wait lines.
_NOISE = re.compile(r'"GET /(ready|health) HTTP/1\.1"')
#: A line of bash's `jobs -l`: `[1]+ 1234 Exit 3                  python -c ...`.
_JOB = re.compile(r"^\[\d+\][+-]?\s+(?P<pid>\d+)\s+(?P<state>\S.*?)\s{2,}(?P<command>.*)$")


class SessionFailed(AssertionError):
    """A block, a process of the session, or the session's end failed; the message says which and shows
    the log."""


def port_in_use(port: int) -> bool:
    """Whether something on this machine holds TCP `port` on loopback (listens or is bound)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _holders(port: int) -> str:
    """Who listens on `port`, as `pid cmdline` (best effort)."""
    found = []
    for conn in psutil.net_connections(kind="tcp"):
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN and conn.pid:
            with contextlib.suppress(psutil.Error):
                found.append(f"pid {conn.pid}: {' '.join(psutil.Process(conn.pid).cmdline())[:160]}")
    return "; ".join(found) or "unknown"


class ShellSession:
    """A README session: `bash -euo pipefail` with the venv active, in `root`, its files in `workdir`."""

    def __init__(self, name: str, root: Path, workdir: Path) -> None:
        self.name = name
        self.root = root
        self.workdir = workdir
        self.log_path = workdir / "session.log"
        self._empty = workdir / "stdin"  # what the blocks' foreground commands read: nothing
        self._bash: asyncio.subprocess.Process | None = None
        self._watch: asyncio.Task[None] | None = None
        #: The processes the blocks started in the background (the bash's children reading /dev/null).
        self.jobs: dict[int, str] = {}
        #: Background processes allowed to end before the session does (a check stopped them).
        self._may_exit: set[int] = set()
        self._died: str | None = None
        self._closing = False
        self._count = 0

    # ---- start -------------------------------------------------------------------------------------

    async def start(self, ports: set[int]) -> None:
        """Check that `ports` are free, then start the shell."""
        taken = sorted(p for p in ports if port_in_use(p))
        if taken:
            who = "\n".join(f"  {port}: {_holders(port)}" for port in taken)
            raise SessionFailed(f"session {self.name!r}: ports its blocks use are taken:\n{who}")
        (self.workdir / "blocks").mkdir(parents=True, exist_ok=True)
        self._empty.write_bytes(b"")
        with self.log_path.open("ab") as log:
            self._bash = await asyncio.create_subprocess_exec(
                "bash", "--noprofile", "--norc",
                stdin=asyncio.subprocess.PIPE, stdout=log, stderr=log, cwd=self.root, start_new_session=True,
            )  # fmt: skip
        self._send("set -euo pipefail\nsource .venv/bin/activate\n")
        self._watch = asyncio.create_task(self._watch_jobs())

    @property
    def sid(self) -> int:
        """The session id (and process group) of everything the session started."""
        assert self._bash is not None
        return self._bash.pid

    def _send(self, text: str) -> None:
        assert self._bash is not None and self._bash.stdin is not None
        self._bash.stdin.write(text.encode())

    # ---- blocks ------------------------------------------------------------------------------------

    async def run(self, block: Block) -> str:
        """Run `block` (shell: sourced in the session; Python: a script of its own); its output."""
        self._count += 1
        self._check_alive(block)
        start = self._log_size()
        self._note(f"::readme:: {block.id} ({block.language})")
        if block.language == "sh":
            await self._run_shell(block, self.workdir / "blocks" / f"{self._count:03d}.sh")
        else:
            await self._run_python(block, self.workdir / "blocks" / f"{self._count:03d}.py")
        self._check_alive(block)
        return self._log_since(start)

    async def _run_shell(self, block: Block, script: Path) -> None:
        _write(script, block.text)
        done, jobs = script.with_suffix(".done"), script.with_suffix(".jobs")
        # `jobs -l` after the block: its background jobs, and any that ended before the watch saw them
        self._send(
            f"source {_quote(script)} < {_quote(self._empty)}\njobs -l > {_quote(jobs)}\n: > {_quote(done)}\n"
        )
        deadline = time.monotonic() + SHELL_WITHIN
        assert self._bash is not None
        while not done.exists():
            if self._bash.returncode is not None:
                raise SessionFailed(self._report(block, f"exited {self._bash.returncode}"))
            self._check_alive(block)
            if time.monotonic() > deadline:
                raise SessionFailed(self._report(block, f"did not finish within {SHELL_WITHIN:.0f} s"))
            await asyncio.sleep(_POLL)
        for line in jobs.read_text(encoding="utf-8").splitlines():
            job = _JOB.match(line)
            if job is None:
                continue
            pid, state, command = int(job["pid"]), job["state"], job["command"]
            if state == "Running":
                self.jobs.setdefault(pid, command)
            elif pid not in self._may_exit:
                self._died = f"`{command[:200]}` (pid {pid}), started in the background, ended ({state})"

    async def _run_python(self, block: Block, script: Path) -> None:
        _write(script, block.text)
        cwd = self.workdir / f"python-{self._count:03d}"
        _write(cwd / ".keep", "")
        with self.log_path.open("ab") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, str(script),
                stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, cwd=cwd, start_new_session=True,
            )  # fmt: skip
        try:
            code = await asyncio.wait_for(proc.wait(), PYTHON_WITHIN)
        except TimeoutError:
            raise SessionFailed(self._report(block, f"did not finish within {PYTHON_WITHIN:.0f} s")) from None
        finally:
            left = _kill_group(proc.pid)
        if code != 0:
            raise SessionFailed(self._report(block, f"exited {code}"))
        if left:
            raise SessionFailed(self._report(block, "left processes running: " + "; ".join(left)))

    # ---- background processes ----------------------------------------------------------------------

    async def _watch_jobs(self) -> None:
        """Record the bash's background children as they appear; note the first that ends early."""
        assert self._bash is not None
        bash = psutil.Process(self._bash.pid)
        while self._bash.returncode is None:
            with contextlib.suppress(psutil.Error):
                for child in bash.children():
                    if child.pid not in self.jobs and _reads_dev_null(child.pid):
                        with contextlib.suppress(psutil.Error):
                            # A child already gone has no command line: bash's `jobs -l` names it instead.
                            if cmdline := " ".join(child.cmdline()):
                                self.jobs[child.pid] = cmdline
            for pid, cmdline in self.jobs.items():
                gone = not psutil.pid_exists(pid) or _is_zombie(pid)
                if gone and pid not in self._may_exit and not self._closing and self._died is None:
                    self._died = f"`{cmdline[:200]}` (pid {pid}), started in the background, exited"
            await asyncio.sleep(_POLL)

    def _check_alive(self, block: Block) -> None:
        if self._died is not None:
            raise SessionFailed(self._report(block, f"failed: {self._died} while it ran"))

    def may_exit(self, pid: int) -> None:
        """`pid` (a background job) may end before the session does: a check stops it on purpose."""
        self._may_exit.add(pid)

    def listeners(self) -> dict[int, int]:
        """The session's servers by the TCP ports they listen on: `{port: pid}` (the top process that
        listens, not a child of it that listens too)."""
        found: dict[int, int] = {}
        procs = self._processes()
        listening: dict[int, list[int]] = {}
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                ports = [
                    c.laddr.port for c in proc.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN
                ]
                if ports:
                    listening[proc.pid] = ports
        for pid, ports in listening.items():
            with contextlib.suppress(psutil.Error):
                if psutil.Process(pid).ppid() in listening:
                    continue
            for port in ports:
                found[port] = pid
        return found

    def _processes(self) -> list[psutil.Process]:
        """Every process of the session but the bash."""
        found = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if proc.pid != self.sid and os.getsid(proc.pid) == self.sid and proc.status() != "zombie":
                    found.append(proc)
        return found

    # ---- end ---------------------------------------------------------------------------------------

    async def close(self, *, check: bool = True) -> None:
        """Stop the session's servers (SIGTERM), wait for its background jobs, end the shell. With `check`,
        fail unless every job exited 0 and nothing was left running; without (after a failure), kill
        what is left after a short grace."""
        if self._bash is None:
            return
        self._closing = True
        self._note(f"::readme:: end of session {self.name!r}: SIGTERM to its servers")
        problems: list[str] = []
        for pid in set(self.listeners().values()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        if not await self._jobs_end(STOP_GRACE if check else 10):
            still = [f"`{c[:160]}` (pid {p})" for p, c in self.jobs.items() if _alive(p)]
            problems.append(f"still running {STOP_GRACE:.0f} s after SIGTERM to the servers: {still}")
            for pid in self.jobs:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            await self._jobs_end(10)
        if check:
            problems += await self._statuses()

        # What a server started may take a moment to follow it (multiprocessing's resource tracker cleans
        # up after the processes it tracked once they are gone): left running means still there after that.
        async def all_ended() -> bool:
            return not any(_alive(p.pid) for p in self._processes())

        with contextlib.suppress(AssertionError):
            await until(all_ended, within=STOP_GRACE / 4, what="the session's processes ending")
        left = [f"pid {p.pid}: {' '.join(p.cmdline())[:160]}" for p in self._processes() if _alive(p.pid)]
        if left:
            problems.append("left running at the end of the session (killed now): " + "; ".join(left))
        for proc in self._processes():
            with contextlib.suppress(psutil.Error):
                proc.kill()
        await self._end_shell()
        self._note(f"::readme:: session {self.name!r} ended")
        if check and problems:
            raise SessionFailed(
                f"session {self.name!r} did not end cleanly:\n- "
                + "\n- ".join(problems)
                + f"\nits log ({self.log_path}) ends:\n{self.log_tail()}"
            )

    async def _jobs_end(self, within: float) -> bool:
        deadline = time.monotonic() + within
        while any(_alive(pid) for pid in self.jobs):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(_POLL)
        return True

    async def _statuses(self) -> list[str]:
        """The exit status of each background job (bash keeps them), as problems unless 0."""
        assert self._bash is not None
        if self._bash.returncode is not None or not self.jobs:
            return []
        out = self.workdir / "statuses"
        waits = "".join(f'wait {pid} && echo "{pid} 0" || echo "{pid} $?"\n' for pid in self.jobs)
        self._send(f"{{\n{waits}}} > {_quote(out)}\n: > {_quote(out.with_suffix('.done'))}\n")
        done = out.with_suffix(".done")

        async def written() -> bool:
            return done.exists()

        try:
            await until(written, within=30, what="bash reporting its background jobs' exit statuses")
        except AssertionError as exc:
            return [str(exc)]
        problems = []
        for line in out.read_text().splitlines() if out.exists() else []:
            pid, code = (int(x) for x in line.split())
            if code != 0 and pid not in self._may_exit:
                problems.append(f"`{self.jobs[pid][:160]}` (pid {pid}) exited {code}")
        return problems

    async def _end_shell(self) -> None:
        assert self._bash is not None and self._bash.stdin is not None
        with contextlib.suppress(OSError):
            self._bash.stdin.close()
        try:
            # a shell still in a block (a failure stopped it) ends with the block's processes gone
            await asyncio.wait_for(self._bash.wait(), 10 if self._died is None else 1)
        except TimeoutError:
            self._bash.kill()
            await self._bash.wait()
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch

    # ---- logs --------------------------------------------------------------------------------------

    def _log_size(self) -> int:
        return self.log_path.stat().st_size if self.log_path.exists() else 0

    def _log_since(self, offset: int) -> str:
        with self.log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _note(self, line: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"\n{time.strftime('%H:%M:%S')} {line}\n")

    def log_tail(self, lines: int = TAIL) -> str:
        """The last `lines` lines of the session's log (readiness polls left out)."""
        text = self._log_since(0) if self.log_path.exists() else ""
        kept = [line for line in text.splitlines() if not _NOISE.search(line)]
        return "\n".join(kept[-lines:])

    def _report(self, block: Block, what: str) -> str:
        return (
            f"{block.id} ({block.language} block under {block.heading!r}, session {self.name!r}) {what}; "
            f"the session's log ({self.log_path}) ends:\n{self.log_tail()}"
        )


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _quote(path: Path) -> str:
    return "'" + str(path).replace("'", "'\\''") + "'"


def _reads_dev_null(pid: int) -> bool:
    """Whether `pid`'s stdin is /dev/null: what bash gives a command it runs in the background."""
    try:
        return os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    except OSError:
        return False


def _is_zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.Error:
        return True


def _alive(pid: int) -> bool:
    return psutil.pid_exists(pid) and not _is_zombie(pid)


def _kill_group(pgid: int, *, include_leader: bool = True) -> list[str]:
    """SIGKILL what is left of process group `pgid` (its leader too unless told not to); what was left."""
    left = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, ProcessLookupError):
            if os.getpgid(proc.pid) != pgid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.pid == pgid and not include_leader:
                continue
            left.append(f"pid {proc.pid}: {' '.join(proc.cmdline())[:160]}")
            proc.kill()
    return left
