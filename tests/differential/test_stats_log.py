"""vLLM's stats line, side by side: vLLM's own server and our worker, stats on (both servers' default),
serve the same request and each logs "Engine 000: Avg prompt throughput: ..." on its own every
``VLLM_LOG_STATS_INTERVAL`` seconds (tests/conftest.py sets 2 for the session); the two lines say the same
things in the same words, only the figures differ.
"""

from __future__ import annotations

import logging
import time

from tests.differential.conftest import Pair
from tests.support.stat_log import LINE, ServerLines, figures, next_record, stat_lines, template
from vllm_frontend_testing.processes import ServerProcess

REQUEST = {
    "model": "tiny",
    "prompt": "the same stats line",
    "max_tokens": 16,
    "extra_body": {"ignore_eos": True},
}


def _busy(line: str) -> bool:
    return LINE.fullmatch(line) is not None and figures(line)[1] > 0


async def test_our_worker_logs_the_stats_line_vllms_server_logs(
    pair: Pair, vllm_server: ServerProcess
) -> None:
    theirs_printed = ServerLines(vllm_server)
    with stat_lines(logging.INFO) as kept:
        theirs = await pair.theirs.completions.create(**REQUEST)  # type: ignore[call-overload]
        ours = await pair.ours.completions.create(**REQUEST)  # type: ignore[call-overload]
        assert theirs.usage is not None and ours.usage is not None
        assert theirs.usage.completion_tokens == ours.usage.completion_tokens == 16
        done = time.time()
        theirs_line = await theirs_printed.wait(_busy)
        await next_record(kept, done)
    ours_lines = [r.getMessage() for r in kept.records if _busy(r.getMessage())]
    assert ours_lines, [r.getMessage() for r in kept.records]
    assert template(ours_lines[-1]) == template(theirs_line)
