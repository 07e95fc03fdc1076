"""B3e's engine alone: the load straight to the real engine core, the engine request our worker sends."""

from __future__ import annotations

import gc

import openai
import pytest

from tests.support.engine_recorder import EngineRecorder
from tests.support.servers import RunningServer
from vllm_frontend_bench.engine_alone import engine_request, run_engine_load
from vllm_frontend_bench.http_e2e import Arm, HttpPlan, engine_alone_result, measure
from vllm_frontend_bench.loadgen import Load, LoadStats, user_message
from vllm_llm import ChatLlm, EngineCoreLlm, TextLlm


async def test_the_engine_alone_gets_the_engine_request_our_worker_sends(
    worker: RunningServer, engine_llm: EngineCoreLlm, engine_recorder: EngineRecorder
) -> None:
    load = Load(1, 1, 8, "tiny")
    client = openai.AsyncOpenAI(base_url=f"{worker.base_url}/v1", api_key="none", max_retries=0)
    try:
        # the load generator's request 3, as it sends it (streaming, ignore_eos, usage)
        stream = await client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": user_message(3)}],
            max_tokens=load.max_tokens,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"ignore_eos": True},
            extra_headers={"X-Request-Id": "engine-alone-twin"},
        )
        usage = [chunk.usage async for chunk in stream if chunk.usage is not None]
    finally:
        await client.close()
    assert usage[-1].completion_tokens == load.max_tokens
    via_worker = engine_recorder.received_one("chatcmpl-engine-alone-twin")

    request = engine_request(ChatLlm(TextLlm(engine_llm)), load, 3)
    async with await engine_llm.generate(request) as outputs:
        tokens = sum([len(out.token_ids) async for out in outputs])
    assert tokens == load.max_tokens
    alone = engine_recorder.received_one(request.request_id)

    assert alone.prompt_token_ids == via_worker.prompt_token_ids
    assert alone.sampling_params == via_worker.sampling_params
    assert alone.sampling_params.max_tokens == load.max_tokens
    assert alone.sampling_params.ignore_eos


async def test_the_engine_alone_takes_a_load(engine_llm: EngineCoreLlm) -> None:
    stats = await run_engine_load(engine_llm, ChatLlm(TextLlm(engine_llm)), Load(4, 10, 6, "tiny"))
    assert stats.failed == 0
    assert stats.completion_tokens == ((6, 10),)
    assert stats.output_tokens == 60
    assert stats.output_tokens_per_s > 0
    assert 0 < stats.ttft_p50_ms <= stats.ttft_p99_ms
    assert stats.itl_p50_ms > 0


async def test_a_refused_request_counts_as_failed(engine_llm: EngineCoreLlm) -> None:
    stats = await run_engine_load(
        engine_llm, ChatLlm(TextLlm(engine_llm)), Load(2, 3, 0, "tiny")
    )  # max_tokens 0
    assert stats.failed == 3
    assert stats.failure_kinds == (("InvalidParameter", 3),)  # max_tokens 0: vLLM's parameter error
    assert stats.output_tokens == 0


def _stats(rate: float, ttft: float = 5.0, tokens: int = 8) -> LoadStats:
    return LoadStats(
        rate / 8,
        rate,
        ttft,
        9.0,
        1.0,
        2.0,
        1.0,
        0,
        output_tokens=tokens * 4,
        completion_tokens=((tokens, 4),),
    )


def test_engine_alone_result() -> None:
    plan = HttpPlan(levels=((1, 2), (32, 4)), repeats=1, max_tokens=8)
    alone = {1: [_stats(100.0)], 32: [_stats(1000.0, ttft=4.0)]}
    ours = {1: [_stats(90.0)], 32: [_stats(950.0)]}
    vllm = {1: [_stats(80.0)], 32: [_stats(800.0, ttft=10.0)]}
    result = engine_alone_result(alone, ours, vllm, plan, "on CPUs [1]")
    assert result.key == "B3e"
    assert result.row("c=32 worker output tok/s").ratio == pytest.approx(0.95)
    assert result.row("c=32 vLLM as deployed output tok/s").ratio == pytest.approx(0.8)
    assert result.row("c=32 vLLM as deployed TTFT p50").ratio == pytest.approx(2.5)
    assert result.notes[-1] == (
        "c=32: the engine alone ran 1.25x vLLM's server as deployed, the most B3 could read here (its "
        "target: 1.25x); our worker ran 0.95x the engine alone"
    )
    assert [(t.description, t.met) for t in result.targets] == [
        ("B3e check: every arm's requests returned max_tokens=8 output tokens", True),
        ("B3e no request fails", True),
    ]
    placed = {1: [_stats(85.0)], 32: [_stats(910.0)]}
    with_placed = engine_alone_result(alone, ours, vllm, plan, "on CPUs [1]", placed)
    assert with_placed.row("c=32 vLLM placed like ours output tok/s").ratio == pytest.approx(0.91)
    assert with_placed.notes[-1] == (
        "c=32: the engine alone ran 1.25x vLLM's server as deployed, the most B3 could read here (its "
        "target: 1.25x), and 1.10x vLLM's server placed like ours, the most B3p could read (its target: "
        "1.1x); our worker ran 0.95x the engine alone"
    )
    short = {1: [_stats(100.0, tokens=7)], 32: [_stats(1000.0)]}
    assert not engine_alone_result(short, ours, vllm, plan, "").targets[0].met


async def test_the_load_generator_measures_with_its_heap_frozen() -> None:
    frozen: list[int] = []

    async def run(load: Load) -> LoadStats:
        frozen.append(gc.get_freeze_count())
        return _stats(10.0)

    plan = HttpPlan(levels=((1, 2), (4, 4)), repeats=2)
    before = gc.get_freeze_count()
    measured = await measure([Arm("a", run), Arm("b", run)], plan)
    assert len(frozen) == 8
    assert min(frozen) > max(before, 1000)  # the test process's heap, imports and all
    if before == 0:
        assert gc.get_freeze_count() == 0  # thawed afterwards
    else:
        assert gc.get_freeze_count() >= before  # a heap frozen before stays frozen
    assert [sorted(m) for m in measured] == [[1, 4], [1, 4]]
    assert all(len(m[c]) == 2 for m in measured for c in m)
