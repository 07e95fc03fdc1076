"""The parent-death watch: an engine core whose frontend died ends itself, as on SIGTERM.

vLLM's engine core does not watch the process that started it. A frontend killed outright (SIGKILL:
the OOM killer, a runtime's stop timeout) leaves its `VLLM::EngineCore` running, reparented to init,
holding the model's memory and its CPU threads (vLLM's own API server does the same). vLLM's workers do
watch *their* parent, the engine core (a death pipe), so it is enough that the engine core ends.

`EngineCoreLlm` names its process in the environment the engine inherits (`announce_parent`,
`PARENT_PID_ENV`). A child takes the name out of its own environment at start-up, so that what it starts
in turn (vLLM's workers) does not inherit it: `watch_parent`, from the start-up hook
(`_startup/sitecustomize.py`) of every interpreter started from that environment, or from an at-fork
hook in a process forked from the frontend. A process that multiprocessing spawned or forked (vLLM's
engine cores and data-parallel coordinator; not multiprocessing's resource tracker, which ignores
SIGTERM and must outlive them all to clean up), and whose parent is the named process, starts a daemon
thread blocked in ``poll()`` on a pidfd of the parent: no timer, no wake-up while the parent lives. The
pidfd turns readable once the parent has exited, whatever ended it. The thread then sends SIGTERM to
the main thread, the signal vLLM's client ends an engine core with: vLLM's handler aborts the requests
and shuts the executor and its workers down. Should that teardown hang, the thread SIGKILLs the process
after `KILL_AFTER` seconds, as vLLM's process manager would (and the workers see their death pipe close).

Not ``prctl(PR_SET_PDEATHSIG)``: it fires when the *thread* that started the child ends, not its process,
and `EngineCoreLlm` builds the engine client in a pool thread (``asyncio.to_thread``); nor the parent's
pid polled in a loop. Without pidfds (Linux < 5.3, a seccomp filter) nothing is watched (logged).
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import threading
import time

__all__ = ["KILL_AFTER", "PARENT_PID_ENV", "announce_parent", "watch_parent"]

logger = logging.getLogger(__name__)

#: The environment variable naming the process whose direct children end themselves when it dies (not
#: `VLLM_*`: vLLM warns about, or refuses, variables of its prefix it does not know).
PARENT_PID_ENV = "LLM_FRONTEND_PID"
#: The argument multiprocessing gives the interpreters it spawns.
_SPAWNED = "--multiprocessing-fork"
#: Seconds from the SIGTERM to a SIGKILL of a child whose teardown did not end: vLLM's own teardown
#: waits up to VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS (5) for the workers, then 4 s after terminating
#: them; a drain (vLLM's --shutdown-timeout) serves nobody once the frontend is gone.
KILL_AFTER = 30.0

_fork_hook = False


def announce_parent() -> None:
    """Make this process the one its multiprocessing children watch from now on: named in the environment
    the spawned ones inherit, an at-fork hook for the forked ones."""
    global _fork_hook
    os.environ[PARENT_PID_ENV] = str(os.getpid())
    if not _fork_hook:
        os.register_at_fork(after_in_child=_watch_forked)
        _fork_hook = True


def watch_parent() -> threading.Thread | None:
    """At an interpreter's start-up: if multiprocessing spawned it from the process `PARENT_PID_ENV`
    names, the thread that ends it once that one exited (it ends at once if that one has already)."""
    named = os.environ.pop(PARENT_PID_ENV, None)
    if named is None or _SPAWNED not in sys.argv:
        return None
    return _watch(named)


def _watch_forked() -> None:
    named = os.environ.pop(PARENT_PID_ENV, None)
    if named is not None:
        _watch(named)


def _watch(named: str) -> threading.Thread | None:
    if not named.isdigit():
        return None
    parent = int(named)
    direct = os.getppid() == parent  # read before the pidfd: a parent that died in between has no pidfd
    try:
        pidfd = os.pidfd_open(parent)
    except ProcessLookupError:
        _end(parent)  # started by a process that is gone already
        return None
    except OSError as exc:
        logger.warning("not watching the parent process %d: no pidfd (%s)", parent, exc)
        return None
    if not direct:  # started further down (a worker of a forked engine core): its own parent watches it
        os.close(pidfd)
        return None
    thread = threading.Thread(target=_wait_then_end, args=(pidfd, parent), name="parent-watch", daemon=True)
    thread.start()
    return thread


def _wait_then_end(pidfd: int, parent: int) -> None:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.poll()  # returns once the parent has exited
    os.close(pidfd)
    _end(parent)


def _end(parent: int) -> None:
    """SIGTERM the main thread (where Python runs signal handlers, and whose blocking call the signal
    interrupts); SIGKILL the process if it is still alive `KILL_AFTER` seconds later."""
    logger.warning("the process that started this one (pid %d) exited: ending pid %d", parent, os.getpid())
    main = threading.main_thread().ident
    assert main is not None
    signal.pthread_kill(main, signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        return  # the default action ended it, or a handler took the signal on this very thread
    time.sleep(KILL_AFTER)
    logger.warning("pid %d did not end within %.0f s of SIGTERM: SIGKILL", os.getpid(), KILL_AFTER)
    os.kill(os.getpid(), signal.SIGKILL)
