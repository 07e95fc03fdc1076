"""Runs the README's blocks session by session (`tests.readme.collector`), with the checks that go with
them (`Hook`): one session open at a time, each block once, a session's earlier blocks before a block."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tests.readme.collector import Block, ports_of, sessions
from tests.readme.session import SessionFailed, ShellSession


@dataclass
class Context:
    """What a check sees: the block, its session (its servers, its log), the block's output (after it
    ran), and a stack for what the check starts that must live as long as the session."""

    block: Block
    session: ShellSession
    resources: contextlib.AsyncExitStack
    output: str = ""


Check = Callable[[Context], Awaitable[None]]


@dataclass(frozen=True)
class Hook:
    """A check run before or after the one block whose text contains `marker`."""

    when: Literal["before", "after"]
    marker: str
    check: Check

    @property
    def name(self) -> str:
        """The check's function name."""
        return getattr(self.check, "__name__", repr(self.check))


@dataclass
class _Open:
    session: ShellSession
    resources: contextlib.AsyncExitStack
    done: set[int] = field(default_factory=set)


class Runner:
    """Runs blocks of `blocks`' sessions in `workdir`, from the repository root `root`."""

    def __init__(self, blocks: list[Block], hooks: list[Hook], root: Path, workdir: Path) -> None:
        self.sessions = sessions(blocks)
        self.hooks = hooks
        self.root = root
        self.workdir = workdir
        self._open: _Open | None = None
        self._broken: dict[str, str] = {}  # session -> what failed in it

    def order(self) -> list[Block]:
        """The blocks that run, in the order they run: session by session."""
        return [block for blocks in self.sessions.values() for block in blocks]

    async def run(self, block: Block) -> None:
        """Run `block` (after the blocks of its session before it that have not run); end its session after
        its last block."""
        if block.session in self._broken:
            raise SessionFailed(f"{block.id} not run: {self._broken[block.session]}")
        try:
            current = await self._enter(block.session)
            for earlier in self.sessions[block.session]:
                if earlier is block:
                    break
                if earlier.line not in current.done:
                    await self._run_one(current, earlier)
            await self._run_one(current, block)
        except BaseException as exc:
            self._broken[block.session] = f"earlier in session {block.session!r}: {str(exc).splitlines()[0]}"
            await self._leave(check=False)
            raise
        if block is self.sessions[block.session][-1]:
            await self.close()

    async def close(self) -> None:
        """End the open session, checking that it ends cleanly."""
        await self._leave(check=True)

    async def _run_one(self, current: _Open, block: Block) -> None:
        context = Context(block, current.session, current.resources)
        current.done.add(block.line)
        for hook in self._hooks(block, "before"):
            await hook.check(context)
        context.output = await current.session.run(block)
        for hook in self._hooks(block, "after"):
            try:
                await hook.check(context)
            except AssertionError as exc:
                raise AssertionError(f"{block.id}: check {hook.name} failed: {exc}") from exc

    def _hooks(self, block: Block, when: str) -> list[Hook]:
        return [hook for hook in self.hooks if hook.when == when and hook.marker in block.text]

    async def _enter(self, name: str) -> _Open:
        if self._open is not None and self._open.session.name == name:
            return self._open
        await self.close()
        session = ShellSession(name, self.root, self.workdir / name)
        self._open = _Open(session, contextlib.AsyncExitStack())
        try:
            await session.start(ports_of(self.sessions[name]))
        except BaseException:
            self._open = None
            raise
        return self._open

    async def _leave(self, *, check: bool) -> None:
        current, self._open = self._open, None
        if current is None:
            return
        try:
            await current.session.close(check=check)
        finally:
            await current.resources.aclose()
