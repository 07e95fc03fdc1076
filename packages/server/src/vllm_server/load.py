"""HTTP requests in progress (vLLM's `server_load`)."""

from __future__ import annotations

from vllm_llm.watch import WatchSender


class LoadCounter:
    """HTTP requests in progress (vLLM's `server_load`), watchable so a drain can wait for zero."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = WatchSender(0)

    @property
    def in_progress(self) -> int:
        """Requests in progress now."""
        return self._count.value

    def add(self, delta: int) -> None:
        """One more (+1) or one fewer (-1) request in progress."""
        self._count.send(self._count.value + delta)

    async def wait_idle(self) -> None:
        """Wait until no request is in progress."""
        await self._count.subscribe().wait_for(lambda n: n == 0)
