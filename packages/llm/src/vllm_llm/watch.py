"""`Watch[T]`: a current value plus async iteration over its changes (like a tokio watch channel).

A `WatchSender` owns the value; any number of `Watch` receivers read it. Receivers see the latest value,
not every intermediate one. Not thread-safe: send from the event loop's thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _State(Generic[T]):
    __slots__ = ("changed", "value", "version")

    def __init__(self, value: T) -> None:
        self.value = value
        self.version = 0
        self.changed = asyncio.Event()


class Watch(Generic[T]):
    """The receiving side: the current value and its changes."""

    __slots__ = ("_state",)

    def __init__(self, state: _State[T]) -> None:
        self._state = state

    @property
    def value(self) -> T:
        """The current value."""
        return self._state.value

    async def wait_for(self, predicate: Callable[[T], bool]) -> T:
        """Wait until the value satisfies `predicate`; return that value."""
        async for value in self:
            if predicate(value):
                return value
        raise AssertionError("unreachable: a watch never ends")

    async def __aiter__(self) -> AsyncIterator[T]:
        """Yield the current value, then every change (the latest value, coalesced)."""
        state = self._state
        seen = state.version
        yield state.value
        while True:
            while state.version == seen:
                await state.changed.wait()
            seen = state.version
            yield state.value


class WatchSender(Generic[T]):
    """The sending side: owns the value and notifies receivers of changes."""

    __slots__ = ("_state",)

    def __init__(self, value: T) -> None:
        self._state = _State(value)

    @property
    def value(self) -> T:
        """The current value."""
        return self._state.value

    def send(self, value: T) -> None:
        """Set the value; receivers wake only if it changed."""
        state = self._state
        if value == state.value:
            return
        state.value = value
        state.version += 1
        event, state.changed = state.changed, asyncio.Event()
        event.set()

    def subscribe(self) -> Watch[T]:
        """A receiver of this value."""
        return Watch(self._state)
