"""vLLM's stats line, side by side: vLLM's own server and our worker, stats on (both servers' default),
serve the same request and each logs "Engine 000: Avg prompt throughput: ..." on its own every
``VLLM_LOG_STATS_INTERVAL`` seconds (tests/conftest.py sets 2 for the session); the two lines say the same
things in the same words, only the figures differ.
"""

from __future__ import annotations

import asyncio
import logging
import time

from tests.differential.conftest import Pair
from tests.support.stat_log import LINE, figures, stat_lines, template
from vllm_frontend_testing.processes import ServerProcess, until

REQUEST = {
    "model": "tiny",
    "prompt": "the same stats line",
    "max_tokens": 16,
    "extra_body": {"ignore_eos": True},
}


async def test_our_worker_logs_the_stats_line_vllms_server_logs(
    pair: Pair, vllm_server: ServerProcess
) -> None:
    before = list(vllm_server.log)  # held: a new line is a new object, not one of these
    old = {id(line) for line in before}
    loop = asyncio.get_running_loop()
    with stat_lines(logging.INFO) as kept:
        theirs = await pair.theirs.completions.create(**REQUEST)  # type: ignore[call-overload]
        ours = await pair.ours.completions.create(**REQUEST)  # type: ignore[call-overload]
        assert theirs.usage is not None and ours.usage is not None
        assert theirs.usage.completion_tokens == ours.usage.completion_tokens == 16
        done = time.time()

        def busy_lines() -> list[str]:
            """vLLM's server's stats lines since the request with tokens generated, from "Engine" on."""
            found = []
            for line in list(vllm_server.log):
                at = line.find("Engine 000: ")
                if id(line) not in old and at >= 0 and LINE.fullmatch(line[at:]):
                    found.append(line[at:])
            return [text for text in found if figures(text)[1] > 0]

        async def theirs_logged() -> bool:
            return bool(busy_lines())

        await until(theirs_logged, within=30, what="vLLM's server logging its stats line")
        after: asyncio.Future[logging.LogRecord] = loop.create_future()
        kept.waiter = (loop, after)
        for record in kept.records:
            if record.created > done and not after.done():
                after.set_result(record)
        await asyncio.wait_for(after, 30)
    our_lines = [r.getMessage() for r in kept.records if figures(r)[1] > 0]
    assert our_lines, [r.getMessage() for r in kept.records]
    assert template(our_lines[-1]) == template(busy_lines()[-1])
