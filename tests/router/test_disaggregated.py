"""Prefill/decode disaggregation with a real KV connector: a prefill worker and a decode worker, each an
engine with vLLM's NixlConnector (UCX over host memory), and a `--remote-prefill` router process in
front of them.

- the router's greedy output equals the decode worker's own (its prefix cache salted away), for prompts
  shorter and longer than a KV block, plain and streamed;
- the decode worker's `vllm:prompt_tokens_by_source{source="external_kv_transfer"}` grows by the prompt:
  its KV came from the prefill worker, not from local compute;
- blocks the prefill worker holds for a decode that never runs are released (`abort_immediately`, and a
  decode request the decode worker refuses), not left to the lease;
- a SIGKILLed prefill worker gives typed errors (503); that the router serves again once it is back is
  tests/soak/test_disaggregated_restart.py (two more minutes of engine start).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
import pytest_asyncio

from tests.support.disaggregation import KV_LEASE_SECONDS, PD, metric, open_pd, transferred
from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import Frontend, until
from vllm_llm import RemoteInvalidRequest
from vllm_llm.disaggregated import PREFILL_KV_TRANSFER_PARAMS
from vllm_llm.wire import FinishReason, GenerateRequest, SamplingParams
from vllm_remote_llm import RemoteLlm

pytestmark = pytest.mark.asyncio(loop_scope="session")

SHORT = "The cat sat on the mat"
LONG = " ".join(["a longer prompt about cats, dogs and the weather"] * 24)  # more than one 128-token block


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pd(tiny_model_dir: Path) -> AsyncIterator[PD]:
    async with open_pd(tiny_model_dir) as running:
        yield running


def _client(front: Frontend) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=front.base_url + "/v1", api_key="none", timeout=PATIENCE, max_retries=0
    )


GREEDY: dict[str, Any] = {"max_tokens": 12, "temperature": 0}


@pytest.mark.parametrize("prompt", [SHORT, LONG], ids=["shorter-than-a-block", "longer-than-a-block"])
async def test_router_output_equals_the_decode_worker_and_the_prompt_came_by_transfer(
    pd: PD, prompt: str
) -> None:
    async with _client(pd.router) as router, _client(pd.decode) as decode:
        await _same_output_by_transfer(pd, router, decode, prompt)


async def _same_output_by_transfer(
    pd: PD, router: openai.AsyncOpenAI, decode: openai.AsyncOpenAI, prompt: str
) -> None:
    before = await transferred(pd.decode)
    got = await router.completions.create(model="tiny", prompt=prompt, **GREEDY)
    after = await transferred(pd.decode)
    prompt_tokens = got.usage.prompt_tokens if got.usage else 0
    print(f"prompt of {prompt_tokens} tokens: {after - before:.0f} came to the decode worker by KV transfer")
    assert after - before == prompt_tokens > 0
    # the decode worker alone, its prefix cache salted away: it computes the prompt itself
    alone = await decode.completions.create(
        model="tiny", prompt=prompt, extra_body={"cache_salt": f"alone-{len(prompt)}"}, **GREEDY
    )
    assert got.choices[0].text == alone.choices[0].text
    assert got.choices[0].finish_reason == alone.choices[0].finish_reason == "length"

    messages: Any = [{"role": "user", "content": prompt}]
    streamed = await router.chat.completions.create(model="tiny", messages=messages, stream=True, **GREEDY)
    text = "".join([c.choices[0].delta.content or "" async for c in streamed if c.choices])
    plain = await decode.chat.completions.create(
        model="tiny", messages=messages, extra_body={"cache_salt": f"chat-{len(prompt)}"}, **GREEDY
    )
    assert text == plain.choices[0].message.content and text


async def test_blocks_held_for_a_decode_that_never_runs_are_released(pd: PD, tiny_model_dir: Path) -> None:
    prefill = await RemoteLlm.connect(pd.prefill.grpc_target)
    decode = await RemoteLlm.connect(pd.decode.grpc_target)
    prompt = list(range(100, 400))

    async def held() -> dict[str, Any]:
        """A prefill leg by hand: the prefill worker keeps the prompt's blocks for a remote decode."""
        request = GenerateRequest(
            request_id="held",
            prompt_token_ids=prompt,
            sampling_params=SamplingParams(max_tokens=1, temperature=0.0),
            kv_transfer_params=dict(PREFILL_KV_TRANSFER_PARAMS),
        )
        outs = [o async for o in await prefill.generate(request)]
        kv = outs[-1].kv_transfer_params
        assert kv is not None and kv["remote_block_ids"], kv
        assert await metric(pd.prefill, "vllm:kv_cache_usage_perc") > 0
        return kv

    async def released() -> bool:
        return await metric(pd.prefill, "vllm:kv_cache_usage_perc") == 0

    # Both waits are far below the workers' lease (KV_LEASE_SECONDS): only a release frees the blocks.
    assert KV_LEASE_SECONDS > 10 * PATIENCE

    try:
        # One request through the router first: the decode worker's connector has then met the prefill
        # worker's (the NIXL handshake). An idle decode engine does not step again after a release,
        # so a release that still needs the handshake waits for its next request.
        async with _client(pd.router) as router:
            await router.completions.create(model="tiny", prompt=SHORT, **GREEDY)
        # a release request: the decode worker's connector tells the prefill worker to free them
        kv = await held()
        release = GenerateRequest(
            request_id="release",
            prompt_token_ids=prompt,
            sampling_params=SamplingParams(max_tokens=4),
            kv_transfer_params=kv,
            abort_immediately=True,
        )
        assert [o.finish_reason async for o in await decode.generate(release)] == [FinishReason.ABORT]
        await until(released, within=PATIENCE, what="the prefill worker freeing the released blocks")

        # a decode request the decode worker refuses (vLLM's serving layer releases those too)
        kv = await held()
        refused = GenerateRequest(
            request_id="refused",
            prompt_token_ids=prompt,
            sampling_params=SamplingParams(max_tokens=4),
            kv_transfer_params=kv,
            data_parallel_rank=3,  # the worker has one engine: refused there, not by RemoteLlm
        )
        with pytest.raises(RemoteInvalidRequest, match="data_parallel_rank"):
            await decode.generate(refused)
        await until(released, within=PATIENCE, what="the prefill worker freeing a refused decode's blocks")
    finally:
        await prefill.shutdown()
        await decode.shutdown()


async def test_a_killed_prefill_worker_gives_typed_errors(pd: PD) -> None:
    """Last in this module: the prefill worker stays down (the restart: tests/soak)."""
    async with _client(pd.router) as router:
        await router.completions.create(model="tiny", prompt=SHORT, **GREEDY)
        await pd.prefill.kill()
        with pytest.raises(openai.APIStatusError) as caught:
            await router.completions.create(model="tiny", prompt=SHORT, **GREEDY)
    assert caught.value.status_code == 503, caught.value
    body = caught.value.body
    assert isinstance(body, dict) and body.get("type") == "ServiceUnavailableError", body
