"""The README, executed: every shell and Python block runs as written, one test per block (`README.md:LINE`),
session by session (how: `tests.readme.collector`), with the checks of `tests.readme.checks`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.readme.checks import HOOKS
from tests.readme.collector import Block, collect
from tests.readme.runner import Runner

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BLOCKS = collect(README)
#: The order the blocks run in (session by session): the order of the tests.
ORDER = Runner(BLOCKS, HOOKS, ROOT, ROOT).order()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def runner(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runner]:
    running = Runner(BLOCKS, HOOKS, ROOT, tmp_path_factory.mktemp("readme"))
    try:
        yield running
    finally:
        await running.close()


def test_every_check_belongs_to_one_block() -> None:
    for hook in HOOKS:
        found = [block.id for block in ORDER if hook.marker in block.text]
        assert len(found) == 1, f"check {hook.name} ({hook.when} {hook.marker!r}) matches blocks {found}"


def test_blocks_not_run_say_why() -> None:
    skipped = [block for block in BLOCKS if block.skip is not None]
    assert all(len(block.skip or "") >= 10 for block in skipped), [(b.id, b.skip) for b in skipped]


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.timeout(1500)  # a block may start servers over a real engine (tests/readme/session.py)
@pytest.mark.parametrize("block", ORDER, ids=[block.id for block in ORDER])
async def test_block(runner: Runner, block: Block) -> None:
    await runner.run(block)
