"""Where B3/B4 run their load generator and router: off the CPUs the engine bound its threads to.

A real process group stands in for a server: its leader (the frontend) stays unbound and starts a child
that binds itself to one CPU, as vLLM's CPU worker binds its OpenMP threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator

from vllm_frontend_bench.placement import engine_cpus, pinned_here, spare_cpus
from vllm_frontend_testing.processes import ServerProcess
from vllm_server.affinity import pin

#: The leader starts a child of two threads (bound to the CPUs in argv[1], or left alone if empty),
#: waits until the child is bound, prints the child's pid, and waits for stdin to close.
_LEADER = """
import os, subprocess, sys
cpus = sys.argv[1]
child = subprocess.Popen(
    [sys.executable, "-c", "import os, sys, threading\\n"
     "threading.Thread(target=sys.stdin.read, daemon=True).start()\\n"
     "cpus = sys.argv[1]\\n"
     "if cpus: os.sched_setaffinity(0, {int(c) for c in cpus.split(',')})\\n"
     "print('bound', flush=True)\\n"
     "sys.stdin.read()", cpus],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
)
child.stdout.readline()
print(child.pid, flush=True)
sys.stdin.read()
"""


@contextlib.asynccontextmanager
async def _group(bound: frozenset[int]) -> AsyncIterator[tuple[ServerProcess, int]]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _LEADER, ",".join(map(str, sorted(bound))),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, process_group=0,
    )  # fmt: skip
    assert process.stdout is not None
    try:
        child = int(await asyncio.wait_for(process.stdout.readline(), 30))
        server = ServerProcess("worker", [])
        server.proc = process  # started here: its stdin holds it, not a serving port
        yield server, child
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def test_the_cpus_a_child_bound_itself_to_are_the_engines() -> None:
    machine = frozenset(os.sched_getaffinity(0))
    bound = frozenset({min(machine)})
    async with _group(bound) as (server, _):
        assert engine_cpus(server) == bound
        rest = machine - bound
        assert spare_cpus(engine_cpus(server)) == (rest or None)


async def test_no_bound_process_means_no_split() -> None:
    async with _group(frozenset()) as (server, child):
        assert os.sched_getaffinity(child) == os.sched_getaffinity(0)
        assert engine_cpus(server) == frozenset()
        assert spare_cpus(engine_cpus(server)) is None


async def test_pin_restricts_every_thread_of_a_process() -> None:
    cpus = frozenset({max(os.sched_getaffinity(0))})
    async with _group(frozenset()) as (server, child):
        pin(child, cpus)
        threads = [int(t) for t in os.listdir(f"/proc/{child}/task")]
        assert len(threads) == 2
        assert all(os.sched_getaffinity(t) == cpus for t in threads)
        assert os.sched_getaffinity(server.pid) == os.sched_getaffinity(0)  # untouched


def test_pinned_here_restores_this_process() -> None:
    before = os.sched_getaffinity(0)
    cpus = frozenset({min(before)})
    with pinned_here(cpus):
        assert os.sched_getaffinity(0) == cpus
    assert os.sched_getaffinity(0) == before
    with pinned_here(None):
        assert os.sched_getaffinity(0) == before
