"""A data-parallel engine (two engine cores): both serve; killing one turns health false for good.

This module starts its own engine (the session engine must survive), so it is one engine for both
properties: data parallelism first, then death.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.llm.harness import collect
from tests.support.engine import tiny_engine_settings
from vllm_llm import EngineCoreLlm, EngineDead, GenerateStream
from vllm_llm.wire import FinishReason, GenerateRequest, SamplingParams


def _request(rid: str, *, rank: int | None = None, max_tokens: int = 6) -> GenerateRequest:
    return GenerateRequest(
        request_id=rid,
        prompt_token_ids=[1, 286, 669, 596],
        data_parallel_rank=rank,
        sampling_params=SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True),
    )


async def _drain(stream: GenerateStream) -> None:
    async for out in stream:
        assert out.finish_reason != FinishReason.ABORT


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def dp_llm(tiny_model_dir: Path) -> AsyncIterator[EngineCoreLlm]:
    """An EngineCoreLlm with data_parallel_size=2."""
    llm = EngineCoreLlm(tiny_engine_settings(tiny_model_dir, data_parallel_size=2, enable_lora=False))
    readiness = llm.subscribe_readiness()
    assert readiness.value is False
    await llm.start()
    assert readiness.value is True
    yield llm
    await llm.shutdown()


async def test_both_engines_serve(dp_llm: EngineCoreLlm) -> None:
    assert dp_llm.info().data_parallel_size == 2
    assert len(dp_llm.engine_pids) == 2
    pinned = await asyncio.gather(
        *[collect(await dp_llm.generate(_request(f"r{r}", rank=r))) for r in (0, 1)]
    )
    assert pinned[0].token_ids == pinned[1].token_ids
    assert set(dp_llm.scheduler_stats) == {0, 1}
    spread = await asyncio.gather(*[dp_llm.generate(_request(f"s{i}")) for i in range(6)])
    results = await asyncio.gather(*[collect(s) for s in spread])
    assert all(r.token_ids == pinned[0].token_ids for r in results)


async def test_rank_out_of_range_is_invalid(dp_llm: EngineCoreLlm) -> None:
    from vllm_llm import InvalidRequest

    with pytest.raises(InvalidRequest, match="data_parallel_rank"):
        await dp_llm.generate(_request("bad-rank", rank=2))


async def test_killing_an_engine_is_permanent_death(dp_llm: EngineCoreLlm) -> None:
    health = dp_llm.subscribe_health()
    # Pinned to the engine that is killed: engine_pids lists the engines in data-parallel rank order.
    stream = await dp_llm.generate(_request("doomed", rank=0, max_tokens=400))
    first = await stream.__anext__()
    assert first.finish_reason is None
    os.kill(dp_llm.engine_pids[0], signal.SIGKILL)
    with pytest.raises(EngineDead):
        await _drain(stream)
    assert await asyncio.wait_for(health.wait_for(lambda ok: not ok), 30) is False
    assert dp_llm.subscribe_readiness().value is False
    with pytest.raises(EngineDead):
        await dp_llm.generate(_request("after-death"))
    with pytest.raises(EngineDead):
        await dp_llm.pause()
    assert health.value is False
