"""The parent-death watch (`vllm_llm.engine_core._parent_watch`) on plain processes: a stand-in for the
frontend announces itself as `EngineCoreLlm` does, starts children the ways vLLM starts its engine
processes, and is SIGKILLed. The real thing, a worker and its engine core:
tests/reliability/test_real_engine.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys

from tests.support.timing import MARGIN, PATIENCE
from vllm_frontend_testing.processes import until

#: The frontend's stand-in: what it starts, one JSON line of their pids, then it waits to be killed.
STAND_IN = """
import json, multiprocessing, os, signal, subprocess, sys, time
from vllm_llm.engine_core import _parent_watch
from vllm_llm.engine_core._vision_compat import install_for_children

install_for_children()
_parent_watch.announce_parent()
_parent_watch.KILL_AFTER = 0.5  # inherited by the forked children only

def stubborn():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    time.sleep(600)

spawn, fork = multiprocessing.get_context("spawn"), multiprocessing.get_context("fork")
with spawn.Pool(1) as pool:
    inherited = pool.apply(os.getenv, (_parent_watch.PARENT_PID_ENV,))
children = {
    "spawned": spawn.Process(target=time.sleep, args=(600,), daemon=False),
    "forked": fork.Process(target=time.sleep, args=(600,), daemon=False),
    "stubborn": fork.Process(target=stubborn, daemon=False),
}
for child in children.values():
    child.start()
plain = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pids = {name: child.pid for name, child in children.items()} | {"plain": plain.pid}
print(json.dumps({"pids": pids, "inherited": inherited}), flush=True)
time.sleep(600)
"""


async def test_the_children_multiprocessing_started_end_with_their_parent() -> None:
    parent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", STAND_IN, stdout=asyncio.subprocess.PIPE, process_group=0
    )
    try:
        assert parent.stdout is not None
        report = json.loads(await asyncio.wait_for(parent.stdout.readline(), PATIENCE))
        pids: dict[str, int] = report["pids"]
        # A child does not pass the parent's name on: its own children (vLLM's workers) do not watch.
        assert report["inherited"] is None
        assert all(_alive(pid) for pid in pids.values())
        parent.send_signal(signal.SIGKILL)  # the parent alone

        async def watched_ended() -> bool:
            return not any(_alive(pids[name]) for name in ("spawned", "forked", "stubborn"))

        # SIGTERM ends the first two at once; the one that ignores it is SIGKILLed after KILL_AFTER.
        await until(watched_ended, within=0.5 + MARGIN, what="the watching children ending")
        # Not a multiprocessing child (like multiprocessing's resource tracker, which must outlive the
        # engine processes to clean up after them): left alone.
        assert _alive(pids["plain"])
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(parent.pid, signal.SIGKILL)
        await parent.communicate()  # to the end of its output, which its children held too


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie has ended: only its parent's wait is left)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
