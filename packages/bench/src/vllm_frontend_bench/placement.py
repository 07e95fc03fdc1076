"""Where the benchmark's processes run: off the CPUs a server's engine bound its threads to.

On a CPU-only machine vLLM binds the engine's OpenMP threads to some CPUs and reserves the rest for
everything else; the kernel still schedules other processes onto the bound CPUs, where they preempt the
forward pass. Processes that stand for other hosts (the load generator, B4's router) are pinned to the
spare CPUs, so they cannot steal the engine's CPU the way they never could on a GPU machine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

from vllm_frontend_testing.processes import ServerProcess
from vllm_server.affinity import engine_bound_cpus, pin


def engine_cpus(server: ServerProcess) -> frozenset[int]:
    """The CPUs the server's engine processes bound themselves to (empty: none bound).

    Judged against this process's affinity, not the server's: our frontend may already have moved itself
    off the engine's CPUs (`--frontend-affinity`), and it is never counted (only processes below it are).
    """
    return engine_bound_cpus(server.pid, within=frozenset(os.sched_getaffinity(os.getpid())))


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
