"""vLLM's periodic stats line from a worker: "Engine 000: Avg prompt throughput: ..., Avg generation
throughput: ..., Running: N reqs, Waiting: N reqs, CPU KV cache usage: ...%, Prefix cache hit rate: ...%".

vLLM's server logs it every ``VLLM_LOG_STATS_INTERVAL`` seconds with stats on (its default). Our worker
feeds vLLM's own `LoggingStatLogger` from EngineCoreLlm's output loop, so the words are vLLM's; what these
tests prove is the figures (the tokens it counts are the tokens the engine computed and generated) and
that the worker logs the line on its own, every interval. The session's engine and worker (tests/conftest.py
sets the interval to 2 s for the session).
"""

from __future__ import annotations

import itertools
import logging
import random
import time

from openai import AsyncOpenAI

from tests.llm.harness import collect
from tests.support.servers import RunningServer
from tests.support.stat_log import figures, next_record, stat_lines
from vllm_llm import EngineCoreLlm
from vllm_llm.wire import GenerateRequest, SamplingParams


async def test_the_stats_line_counts_the_tokens_the_engine_computed_and_generated(
    engine_llm: EngineCoreLlm,
) -> None:
    assert engine_llm.stat_log_interval == 2.0  # VLLM_LOG_STATS_INTERVAL, as vLLM's server reads it
    rng = random.Random(time.time_ns())
    prompt = [1, *(rng.randrange(10, 1000) for _ in range(47))]  # no prefix another test sent
    # DEBUG too: vLLM logs an idle engine's line at DEBUG, and every line (the worker's own every 2 s
    # among them) starts a new interval; the lines between two of ours cover the tokens between them.
    with stat_lines(logging.DEBUG) as kept:
        await engine_llm.do_log_stats()
        first = len(kept.records) - 1
        request = GenerateRequest(
            request_id="stat-log",
            prompt_token_ids=prompt,
            sampling_params=SamplingParams(max_tokens=24, ignore_eos=True, temperature=0.0),
        )
        collected = await collect(await engine_llm.generate(request))
        await engine_llm.do_log_stats()
    lines = kept.records[first:]
    assert len(lines) >= 2
    info = collected.outputs[0].prompt_info
    assert info is not None and len(collected.token_ids) == 24
    computed = len(prompt) - info.num_cached_tokens
    # throughput x the interval it was measured over, summed: the tokens of the whole window
    prompt_tokens = generation_tokens = 0.0
    span = 0.0
    for before, line in itertools.pairwise(lines):
        interval = line.created - before.created
        prompt_rate, generation_rate = figures(line)
        prompt_tokens += prompt_rate * interval
        generation_tokens += generation_rate * interval
        span += interval
    slack = 0.5 + 0.05 * span  # each figure is rounded to 0.1 tokens/s
    assert abs(prompt_tokens - computed) <= slack, (prompt_tokens, computed, [r.getMessage() for r in lines])
    assert abs(generation_tokens - 24) <= slack, (generation_tokens, [r.getMessage() for r in lines])


async def test_the_worker_logs_the_line_every_interval_while_it_serves(worker: RunningServer) -> None:
    with stat_lines(logging.INFO) as kept:
        started = time.time()
        async with AsyncOpenAI(base_url=f"{worker.base_url}/v1", api_key="unused", max_retries=0) as client:
            completion = await client.completions.create(
                model="tiny", prompt="the stats line", max_tokens=16, extra_body={"ignore_eos": True}
            )
        assert completion.usage is not None and completion.usage.completion_tokens == 16
        # No call of ours: the worker's own task logs a line every interval, at INFO while busy.
        await next_record(kept, time.time())
    # The lines from the request's start to the first after its end cover the tokens it generated.
    lines = [r for r in kept.records if r.created >= started]
    assert any(figures(line)[1] > 0 for line in lines), [r.getMessage() for r in lines]
