"""vLLM's periodic stats line from a worker: "Engine 000: Avg prompt throughput: ..., Avg generation
throughput: ..., Running: N reqs, Waiting: N reqs, CPU KV cache usage: ...%, Prefix cache hit rate: ...%".

vLLM's server logs it every ``VLLM_LOG_STATS_INTERVAL`` seconds with stats on (its default). Our worker
feeds vLLM's own `LoggingStatLogger` from EngineCoreLlm's output loop, so the words are vLLM's; what these
tests prove is the figures fed to it (the tokens the engine computed and generated, batch by batch) and
that the worker logs the line on its own, every interval. The session's engine and worker (tests/conftest.py
sets the interval to 2 s for the session).
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import pytest
from openai import AsyncOpenAI

from tests.llm.harness import collect
from tests.support.servers import RunningServer
from tests.support.stat_log import figures, next_record, stat_lines
from vllm_llm import EngineCoreLlm
from vllm_llm.wire import GenerateRequest, SamplingParams


async def test_vllms_stat_logger_is_fed_the_tokens_the_engine_computed_and_generated(
    engine_llm: EngineCoreLlm, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert engine_llm.stat_log_interval == 2.0  # VLLM_LOG_STATS_INTERVAL, as vLLM's server reads it
    stat_log = engine_llm._stat_log
    assert stat_log is not None
    fed: list[tuple[int, Any, Any]] = []
    record = stat_log.record

    def keep(engine: int, scheduler_stats: Any, iteration: Any, mm_cache_stats: Any) -> None:
        fed.append((engine, scheduler_stats, iteration))
        record(engine, scheduler_stats, iteration, mm_cache_stats)

    monkeypatch.setattr(stat_log, "record", keep)
    rng = random.Random(time.time_ns())
    prompt = [1, *(rng.randrange(10, 1000) for _ in range(47))]  # no prefix another test sent
    request = GenerateRequest(
        request_id="stat-log",
        prompt_token_ids=prompt,
        sampling_params=SamplingParams(max_tokens=24, ignore_eos=True, temperature=0.0),
    )
    collected = await collect(await engine_llm.generate(request))
    info = collected.outputs[0].prompt_info
    assert info is not None and len(collected.token_ids) == 24
    # What vLLM's IterationStats would hold for these batches, summed: the prompt tokens the engine
    # computed (not those its prefix cache had) and every token it generated; one scheduler stats each.
    iterations = [it for _, _, it in fed if it is not None]
    assert sum(it.prompt_token_stats.computed for it in iterations) == len(prompt) - info.num_cached_tokens
    assert sum(it.num_generation_tokens for it in iterations) == 24
    assert sum(it.num_preempted_reqs for it in iterations) == 0
    assert {engine for engine, _, _ in fed} == {0}
    assert all(stats is not None for _, stats, _ in fed)


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
