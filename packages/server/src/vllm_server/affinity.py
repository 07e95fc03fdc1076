"""Keep the frontend off the CPUs the engine bound its threads to.

vLLM's CPU backend binds each worker's OpenMP threads (the forward pass) to a set of CPUs and reserves
the rest of the machine "for the scheduler process" and everything else, but nothing keeps the other
processes off the bound CPUs: the kernel moves the frontend there whenever the reserved CPUs look busy,
and there it preempts the forward pass. Kept off the engine's core, the frontend lets the forward pass
have all of it, and a worker's throughput rises and steadies (figures in docs/performance.md, "The
server process").

`keep_off_engine_cpus` moves every thread of this process to the CPUs of its affinity that no process
below it bound itself to. It changes nothing when the engine bound nothing (GPU workers without vLLM's
NUMA binding, `VLLM_CPU_OMP_THREADS_BIND=nobind`) or bound every CPU this process may use; with NUMA
binding of some GPUs' workers it moves the frontend to the other nodes' CPUs (the log says where).
vLLM's own processes (the engine core included) are left where they are.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)


def pin(pid: int, cpus: frozenset[int]) -> None:
    """Restrict every thread of process `pid` to `cpus` (threads it starts later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            os.sched_setaffinity(int(task.name), cpus)


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    todo = list(children.get(pid, ()))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, ()))
    return found


def engine_bound_cpus(pid: int | None = None, *, within: frozenset[int] | None = None) -> frozenset[int]:
    """The CPUs that processes below `pid` (default: this one) bound themselves to.

    A descendant whose affinity is narrower than `within` (default: `pid`'s affinity) bound itself
    (vLLM's CPU worker binds its OpenMP threads); descendants that inherited the affinity are not
    counted. Empty: none bound.
    """
    pid = os.getpid() if pid is None else pid
    allowed = os.sched_getaffinity(pid) if within is None else within
    bound: set[int] = set()
    for child in descendants(pid):
        with contextlib.suppress(OSError):
            cpus = os.sched_getaffinity(child)
            if cpus < allowed:
                bound |= cpus
    return frozenset(bound)


def keep_off_engine_cpus() -> frozenset[int] | None:
    """Move this process (every thread) off the CPUs its engine bound; returns the CPUs it now runs on.

    None, and nothing changed, when the engine bound no CPUs or left none of this process's free.
    """
    allowed = frozenset(os.sched_getaffinity(0))
    bound = engine_bound_cpus()
    spare = allowed - bound
    if not bound or not spare:
        logger.info(
            "frontend CPUs left alone: %s",
            "the engine bound no CPUs of its own"
            if not bound
            else f"the engine bound all of {sorted(allowed)}",
        )
        return None
    pin(os.getpid(), spare)
    logger.info(
        "frontend kept off the engine's CPUs: the frontend runs on CPUs %s, the engine bound %s",
        sorted(spare),
        sorted(bound),
    )
    return spare
