"""HTTP requests in progress: all of them (what a drain waits for) and the inference ones (`/load`)."""

from __future__ import annotations

from vllm_llm.watch import WatchSender


class LoadCounter:
    """HTTP requests in progress, watchable so a drain can wait for zero, and among them the inference
    requests vLLM counts as `server_load` (its `load_aware_call` routes: not `/load` itself, nor probes,
    metrics or tokenization)."""

    __slots__ = ("_count", "_inference")

    def __init__(self) -> None:
        self._count = WatchSender(0)
        self._inference = 0

    @property
    def in_progress(self) -> int:
        """HTTP requests in progress now, whatever their route."""
        return self._count.value

    @property
    def server_load(self) -> int:
        """Inference requests in progress now (vLLM's `server_load`)."""
        return self._inference

    def add(self, delta: int, *, inference: bool = False) -> None:
        """One more (+1) or one fewer (-1) request in progress; `inference` for a route `/load` counts."""
        self._count.send(self._count.value + delta)
        if inference:
            self._inference += delta

    async def wait_idle(self) -> None:
        """Wait until no request is in progress."""
        await self._count.subscribe().wait_for(lambda n: n == 0)
