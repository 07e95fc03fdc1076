"""CPU time of the benchmark's server processes, from /proc: what a frontend or router costs per token.

`CpuOf` names the processes a figure counts: one process (a worker's frontend or vLLM's API server,
whose engine core is a child that must not be counted) or a process and everything below it (a router
that may run helpers). `cpu_seconds` reads user + system time of each (`/proc/<pid>/stat` fields 14
and 15, in clock ticks); a figure is the difference over a load, per 1,000 output tokens.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from vllm_server.affinity import descendants

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int, proc: Path = Path("/proc")) -> float:
    """User + system CPU seconds of process `pid` so far (all its threads); 0.0 once it is gone."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # Fields after the command (which may contain spaces and parentheses): state is field 3, so
    # utime (14) and stime (15) are the 12th and 13th after the closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S


@dataclass(frozen=True, slots=True)
class CpuOf:
    """The processes one CPU figure counts: `pid`, and with `children` every process below it."""

    pid: int
    children: bool = False

    def pids(self) -> list[int]:
        """The processes counted right now."""
        return [self.pid, *(descendants(self.pid) if self.children else ())]

    def seconds(self) -> dict[int, float]:
        """CPU seconds so far of each counted process."""
        return {pid: process_cpu_seconds(pid) for pid in self.pids()}


class CpuMeter:
    """CPU seconds `CpuOf` spent between `start()` and `stop()` (processes that appear meanwhile count
    from zero; one that ends meanwhile loses what it spent since `start`: routers keep theirs)."""

    def __init__(self, of: CpuOf) -> None:
        self.of = of
        self._before: dict[int, float] = {}

    def start(self) -> None:
        """Take the first reading."""
        self._before = self.of.seconds()

    def stop(self) -> float:
        """CPU seconds since `start()`."""
        after = self.of.seconds()
        return sum(max(0.0, s - self._before.get(pid, 0.0)) for pid, s in after.items())


def per_1k_tokens(cpu_seconds: float, tokens: int) -> float:
    """CPU seconds per 1,000 output tokens; NaN without tokens."""
    return cpu_seconds / tokens * 1000 if tokens else math.nan
