"""CPU accounting of the benchmark's servers, from /proc: a process alone, or with those below it."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from vllm_frontend_bench.cpu import CpuMeter, CpuOf, per_1k_tokens, process_cpu_seconds

#: Burns `argv[1]` s of its own CPU, says so, then waits for stdin to close.
_BURN = (
    "import sys, time\n"
    "while time.process_time() < float(sys.argv[1]): pass\n"
    "print('burnt', flush=True)\n"
    "sys.stdin.read()\n"
)
#: Starts a burning child (argv[1] s), waits until the child says it is done, says so, waits for stdin.
_PARENT = (
    "import subprocess, sys\n"
    f"child = subprocess.Popen([sys.executable, '-c', {_BURN!r}, sys.argv[1]], stdin=subprocess.PIPE,"
    " stdout=subprocess.PIPE)\n"
    "child.stdout.readline()\n"
    "print('child burnt', flush=True)\n"
    "sys.stdin.read()\n"
)


def test_stat_fields_are_read_after_the_command(tmp_path: Path) -> None:
    # A command may contain spaces and parentheses; utime and stime are fields 14 and 15.
    ticks = os.sysconf("SC_CLK_TCK")
    fields = ["S", *["0"] * 10, str(3 * ticks), str(ticks), *["0"] * 30]
    (tmp_path / "42").mkdir()
    (tmp_path / "42" / "stat").write_text(f"42 (odd ) (name) {' '.join(fields)}\n")
    assert process_cpu_seconds(42, tmp_path) == pytest.approx(4.0)
    assert process_cpu_seconds(43, tmp_path) == 0.0  # gone


def test_per_1k_tokens() -> None:
    assert per_1k_tokens(0.5, 10_000) == pytest.approx(0.05)
    assert math.isnan(per_1k_tokens(0.5, 0))


def _plain_environment() -> dict[str, str]:
    """This process's environment without the start-up hook an in-process engine puts on PYTHONPATH for
    its children (`vllm_llm.engine_core._vision_compat`): with it every child interpreter imports
    vllm_llm first, about 0.4 s of CPU these tests would count (after any test of the session that started an
    engine)."""
    from vllm_llm.engine_core._vision_compat import STARTUP_DIR

    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_DIR]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


@contextlib.asynccontextmanager
async def _started(code: str, seconds: float) -> AsyncIterator[asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        str(seconds),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=_plain_environment(),
    )
    try:
        yield process
    finally:
        assert process.stdin is not None
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)


async def test_a_process_cpu_is_metered_over_a_span() -> None:
    async with _started(_BURN, 0.3) as process:
        assert process.stdout is not None
        meter = CpuMeter(CpuOf(process.pid))
        meter.start()  # the interpreter's start-up is already behind or counted from here: burnt >= 0.3
        before = sum(CpuOf(process.pid).seconds().values())
        assert await asyncio.wait_for(process.stdout.readline(), 60) == b"burnt\n"
        spent = meter.stop()
    assert 0.3 - before - 0.05 <= spent <= 0.3 - before + 0.3


async def test_children_count_only_when_asked() -> None:
    async with _started(_PARENT, 0.5) as process:
        assert process.stdout is not None
        alone, tree = CpuMeter(CpuOf(process.pid)), CpuMeter(CpuOf(process.pid, children=True))
        alone.start()
        tree.start()
        assert await asyncio.wait_for(process.stdout.readline(), 60) == b"child burnt\n"
        assert len(CpuOf(process.pid, children=True).pids()) == 2
        spent_alone, spent_tree = alone.stop(), tree.stop()
    assert spent_alone < 0.1  # the parent only waited
    assert spent_tree >= 0.25  # the child's burn (less whatever it spent before the meter started)
