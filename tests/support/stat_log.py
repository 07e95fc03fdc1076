"""vLLM's stats line ("Engine 000: Avg prompt throughput: ...") as tests read it: its shape, its
figures, and the records of vLLM's stat logger in this process."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

from vllm_llm._engine_stat_log import STAT_LOGGER_NAME

LINE = re.compile(
    r"Engine 000: Avg prompt throughput: (?P<prompt>\d+\.\d) tokens/s, "
    r"Avg generation throughput: (?P<generation>\d+\.\d) tokens/s, "
    r"Running: \d+ reqs, Waiting: \d+ reqs, CPU KV cache usage: \d+\.\d%"
    r"(, Prefix cache hit rate: \d+\.\d%)?"
)


class Kept(logging.Handler):
    """The records of a logger; `waiter`, once set, gets the next record."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.waiter: tuple[asyncio.AbstractEventLoop, asyncio.Future[logging.LogRecord]] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if self.waiter is not None:
            loop, future = self.waiter
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
