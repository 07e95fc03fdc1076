"""Over the real remote path (RemoteLlm -> GrpcFrontend -> MockLlm), a slow reader loses nothing."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.grpc_serving import request, serving
from vllm_llm import MockLlm
from vllm_llm.wire import FinishReason, GenerateOutput
from vllm_remote_llm import RemoteLlm


@pytest_asyncio.fixture
async def remote() -> AsyncIterator[tuple[MockLlm, RemoteLlm]]:
    """A MockLlm stepping every millisecond, served over gRPC, and a RemoteLlm to it."""
    mock = MockLlm(step_interval=0.001)
    async with serving(mock) as served:
        llm = await RemoteLlm.connect(served.target)
        try:
            yield mock, llm
        finally:
            await llm.shutdown()
    await mock.shutdown()


async def _slow_read(
    llm: RemoteLlm, rid: str, prompt: list[int], rng: random.Random, **sp: int
) -> list[GenerateOutput]:
    got = []
    stream = await llm.generate(request(rid, prompt=prompt, **sp))
    async for out in stream:
        got.append(out)
        await asyncio.sleep(rng.choice((0, 0, 0.001, 0.004)))
    return got


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_slow_readers_get_every_token_in_order(remote: tuple[MockLlm, RemoteLlm], seed: int) -> None:
    mock, llm = remote
    rng = random.Random(seed)
    prompts = [[rng.randrange(10, 1000) for _ in range(rng.randrange(1, 6))] for _ in range(8)]
    lengths = [rng.randrange(1, 80) for _ in prompts]
    logprobs = [rng.choice((None, 2)) for _ in prompts]
    results = await asyncio.gather(
        *(
            _slow_read(
                llm,
                f"r{seed}-{i}",
                p,
                random.Random(seed * 100 + i),
                max_tokens=n,
                **({"logprobs": k} if k else {}),
            )
            for i, (p, n, k) in enumerate(zip(prompts, lengths, logprobs, strict=True))
        )
    )
    for got, prompt, n, k in zip(results, prompts, lengths, logprobs, strict=True):
        tokens = [t for o in got for t in o.token_ids]
        assert tokens == [mock.token_at(prompt, i) for i in range(n)]
        assert [o.finish_reason for o in got].count(None) == len(got) - 1
        assert got[-1].finish_reason == FinishReason.LENGTH
        assert got[0].prompt_info is not None and got[0].prompt_info.num_prompt_tokens == len(prompt)
        assert all(o.prompt_info is None for o in got[1:])
        if k is not None:
            rows = [r for o in got for r in o.logprobs or []]
            assert [r.token_ids[0] for r in rows] == tokens
