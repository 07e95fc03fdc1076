"""The frontend keeps off the CPUs its engine bound (`vllm_server.affinity`).

Against the session's real engine (vLLM's CPU worker binds its OpenMP threads) and, for the move
itself, in a child interpreter below which a process binds itself, as vLLM's worker does: the test
process must not move itself.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vllm_llm import EngineCoreLlm
from vllm_server.affinity import descendants, engine_bound_cpus
from vllm_server.cli import serve_config
from vllm_server.config import ServerConfig


def _comm(pid: int) -> str:
    return Path(f"/proc/{pid}/comm").read_text().strip()


async def test_the_cpus_the_real_engine_bound_are_found(engine_llm: EngineCoreLlm) -> None:
    allowed = frozenset(os.sched_getaffinity(0))
    workers = [pid for pid in descendants(os.getpid()) if _comm(pid).startswith("VLLM::Worker")]
    assert workers, "the session's engine runs a VLLM::Worker process below this one"
    bound = engine_bound_cpus()
    # vLLM's CPU backend binds the forward pass and reserves at least one CPU for the rest
    assert bound and bound < allowed
    assert all(os.sched_getaffinity(pid) <= bound for pid in workers)


#: Starts a child per CPU set in argv[1:] that binds itself to it (an empty set: stays unbound) and a
#: thread of its own, calls keep_off_engine_cpus, and prints what it returned and where every thread of
#: this process and the children's processes runs.
_SCRIPT = """
import json, os, subprocess, sys, threading
from pathlib import Path
from vllm_server.affinity import keep_off_engine_cpus
children = [subprocess.Popen(
    [sys.executable, "-c",
     "import os, sys\\n"
     "cpus = sys.argv[1]\\n"
     "if cpus: os.sched_setaffinity(0, {int(c) for c in cpus.split(',')})\\n"
     "print('bound', flush=True)\\n"
     "sys.stdin.read()", cpus],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
) for cpus in sys.argv[1:]]
for child in children:
    child.stdout.readline()
stop = threading.Event()
threading.Thread(target=stop.wait).start()  # a thread started before the move
spare = keep_off_engine_cpus()
def where(pid):
    return sorted({c for t in Path(f"/proc/{pid}/task").iterdir() for c in os.sched_getaffinity(int(t.name))})
def every_thread(pid):
    return [sorted(os.sched_getaffinity(int(t.name))) for t in Path(f"/proc/{pid}/task").iterdir()]
print(json.dumps({"spare": sorted(spare) if spare is not None else None,
                  "threads": every_thread(os.getpid()), "children": [where(c.pid) for c in children]}))
stop.set()
for child in children:
    child.stdin.close()
    child.wait()
"""


def _run(*bound: frozenset[int]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *(",".join(map(str, sorted(b))) for b in bound)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_every_thread_moves_off_the_cpus_a_child_bound() -> None:
    machine = frozenset(os.sched_getaffinity(0))
    bound = frozenset({min(machine)})
    rest = sorted(machine - bound)
    result = _run(bound, frozenset())  # a bound worker beside an unbound engine core, as vLLM's
    assert result["spare"] == rest
    threads = result["threads"]
    assert isinstance(threads, list) and len(threads) >= 2  # the main thread and the one started before
    assert all(cpus == rest for cpus in threads)
    assert result["children"] == [sorted(bound), sorted(machine)]  # the engine's processes stay put


def test_nothing_moves_when_the_engine_bound_nothing_or_everything() -> None:
    machine = sorted(os.sched_getaffinity(0))
    unbound: tuple[frozenset[int], ...] = (frozenset(),)
    everything = tuple(frozenset({c}) for c in machine)  # a worker per CPU, each bound to its own
    for bound in (unbound, everything):
        result = _run(*bound)
        assert result["spare"] is None
        threads = result["threads"]
        assert isinstance(threads, list) and all(cpus == machine for cpus in threads)


def test_only_the_cli_moves_its_process() -> None:
    # process-wide, like the heap freeze: an embedded Server leaves it to its host
    assert ServerConfig().keep_off_engine_cpus is False
    assert serve_config(["--mock"]).server.keep_off_engine_cpus is True
    off = serve_config(["--mock", "--frontend-affinity", "off"])
    assert off.server.keep_off_engine_cpus is False
