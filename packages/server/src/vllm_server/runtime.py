"""How a server process runs: its event loop and its garbage collector.

- The event loop (`--event-loop`): uvloop when installed, else asyncio's own. uvloop costs less CPU per
  event than asyncio's selector loop, and a server that streams one message per token is made of
  events: on the router hop both the router and the worker spend less CPU per delivered token on it
  (figures in docs/performance.md). uvicorn's `--loop auto` and vLLM's own OpenAI server make the same
  choice.
- The heap of start-up (`freeze_heap`): once the Llm is first ready, everything alive is collected and
  frozen (`gc.freeze`), so the cyclic collector's full collections no longer walk the modules, the
  engine client and the tokenizer (hundreds of thousands of objects once vllm and torch are imported).
  Without it a streaming server pauses at every full collection, and B1's p99 inter-token gap through
  the hop is several times the in-process one; with the heap frozen it is the in-process one (figures
  in docs/performance.md). vLLM's OpenAI server freezes its heap at start-up for the same reason.
- The collector's youngest generation, from then on (`SERVING_GEN0_THRESHOLD`): a streaming server
  allocates a few containers per token and frees them by reference counting, so the count that starts
  a young collection (700 by default: allocations minus deallocations) is reached by the objects one
  engine step leaves in flight, about twenty times a second under B3's load, and every tenth of those
  collections walks the middle generation, where each request's state sits while it streams (about
  5 ms each there). Measured on a worker under B3's load: 3 % of its CPU in the collector; with the
  threshold at `SERVING_GEN0_THRESHOLD` no collection ran during the load. Garbage in cycles
  (tracebacks, closed tasks) waits longer: at most that many objects.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Coroutine
from typing import Any, Literal, TypeVar

logger = logging.getLogger(__name__)

EventLoopChoice = Literal["auto", "uvloop", "asyncio"]
EVENT_LOOPS: tuple[EventLoopChoice, ...] = ("auto", "uvloop", "asyncio")

T = TypeVar("T")

#: The young generation's threshold once the heap is frozen (see the module docstring); the middle and
#: old thresholds stay Python's.
SERVING_GEN0_THRESHOLD = 50_000


def loop_factory(choice: str = "auto") -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The loop factory of `choice`; None is asyncio's default loop.

    "auto" is uvloop when it can be imported; "uvloop" without uvloop installed is a `SystemExit`.
    """
    if choice not in EVENT_LOOPS:
        raise ValueError(f"unknown event loop {choice!r}; choose from {list(EVENT_LOOPS)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise SystemExit("--event-loop uvloop: uvloop is not installed") from None
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], choice: str = "auto") -> T:
    """`asyncio.run(main)` on the loop of `choice`."""
    with asyncio.Runner(loop_factory=loop_factory(choice)) as runner:
        return runner.run(main)


def freeze_heap() -> int:
    """Collect, then freeze every object alive, then raise the young generation's threshold to
    `SERVING_GEN0_THRESHOLD` (see the module docstring); returns how many objects are frozen.

    For the process's owner to call once its start-up is done: objects frozen are never collected, so a
    library that is embedded leaves this to its host.
    """
    gc.collect()
    gc.freeze()
    frozen = gc.get_freeze_count()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(SERVING_GEN0_THRESHOLD, middle, old)
    logger.info(
        "froze the start-up heap: %d objects (gc.freeze); young collections every %d allocations",
        frozen,
        SERVING_GEN0_THRESHOLD,
    )
    return frozen
