"""vLLM's stats line ("Engine 000: Avg prompt throughput: ...") as tests read it: its shape, its
figures, and the records of vLLM's stat logger in this process."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from vllm_frontend_testing.processes import ServerProcess, until
from vllm_llm.engine_core._stat_log import STAT_LOGGER_NAME

LINE = re.compile(
    r"Engine 000: Avg prompt throughput: (?P<prompt>\d+\.\d) tokens/s, "
    r"Avg generation throughput: (?P<generation>\d+\.\d) tokens/s, "
    r"Running: \d+ reqs, Waiting: \d+ reqs, CPU KV cache usage: \d+\.\d%"
    r"(, Prefix cache hit rate: \d+\.\d%)?"
)


#: A loop, a future for it and the check a record must pass to resolve it.
Waiter = tuple[
    asyncio.AbstractEventLoop, asyncio.Future[logging.LogRecord], Callable[[logging.LogRecord], bool]
]


class Kept(logging.Handler):
    """The records of a logger; `waiter`, once set, gets the next record that passes its check."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.waiter: Waiter | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if self.waiter is not None:
            loop, future, check = self.waiter
            if check(record):
                loop.call_soon_threadsafe(_resolve, future, record)


def _resolve(future: asyncio.Future[logging.LogRecord], record: logging.LogRecord) -> None:
    if not future.done():
        future.set_result(record)


@contextmanager
def stat_lines(level: int) -> Iterator[Kept]:
    """Every record of vLLM's stat logger while inside, the logger at `level` meanwhile."""
    logger = logging.getLogger(STAT_LOGGER_NAME)
    kept = Kept()
    before = logger.level
    logger.addHandler(kept)
    logger.setLevel(level)
    try:
        yield kept
    finally:
        logger.removeHandler(kept)
        logger.setLevel(before)


def figures(line: logging.LogRecord | str) -> tuple[float, float]:
    """(prompt, generation) tokens/s of a stats line (a record, or the text from "Engine 000:" on)."""
    text = line if isinstance(line, str) else line.getMessage()
    match = LINE.fullmatch(text)
    assert match is not None, text
    return float(match["prompt"]), float(match["generation"])


def template(text: str) -> str:
    """A stats line with every figure replaced by N: what two servers' lines must share."""
    return re.sub(r"\d+(\.\d+)?", "N", text)


class ServerLines:
    """The stats lines a server process prints from now on (its output kept in `log`)."""

    def __init__(self, server: ServerProcess) -> None:
        self._server = server
        self._held = list(server.log)  # held, so no line printed later can share an id with them
        self._old = {id(line) for line in self._held}

    def new(self) -> list[str]:
        """Its stats lines printed since, each from "Engine 000:" on."""
        found = []
        for line in list(self._server.log):
            at = line.find("Engine 000: ")
            if at >= 0 and id(line) not in self._old:
                found.append(line[at:])
        return found

    async def wait(self, check: Callable[[str], bool], *, within: float = 30) -> str:
        """The newest stats line printed since that passes `check`, once there is one."""

        async def printed() -> bool:
            return any(check(line) for line in self.new())

        await until(printed, within=within, what=f"{self._server.name} printing its stats line")
        return [line for line in self.new() if check(line)][-1]


async def next_record(
    kept: Kept,
    after: float,
    check: Callable[[logging.LogRecord], bool] = lambda _: True,
    *,
    within: float = 30,
) -> logging.LogRecord:
    """The first record `kept` got that was created after `after` (wall clock) and passes `check`, once
    there is one. (Every server of this process logs through vLLM's one stat logger: `check` tells which.)"""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[logging.LogRecord] = loop.create_future()
    kept.waiter = (loop, future, check)
    for record in kept.records:
        if record.created > after and check(record) and not future.done():
            future.set_result(record)
    return await asyncio.wait_for(future, within)
