"""DisaggregatedLlm orchestrating two MockLlms (a real KV transfer: tests/readme/checks.py).

The contract suite runs it too (tests/llm/conftest.py, `disaggregated_mock`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.llm.harness import collect
from tests.support.mock import tiny_mock
from vllm_llm import ChatLlm, ChatMessage, ChatRequest, InvalidRequest, LlmError, MockLlm, TextLlm
from vllm_llm.disaggregated import (
    PREFILL_KV_TRANSFER_PARAMS,
    DisaggregatedLlm,
    IncompatibleWorkers,
    check_compatible,
)
from vllm_llm.mock import default_info
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest, SamplingParams


def _request(request_id: str = "r", **sampling: object) -> GenerateRequest:
    params: dict[str, object] = {"temperature": 0.0, "max_tokens": 6, "min_tokens": 2, **sampling}
    return GenerateRequest(
        request_id=request_id,
        prompt_token_ids=[5, 17, 42, 99, 7],
        sampling_params=SamplingParams(**params),  # type: ignore[arg-type]
    )


async def test_prefill_leg_then_decode_leg_with_the_answered_params() -> None:
    prefill, decode = MockLlm(), MockLlm()
    llm = DisaggregatedLlm(prefill, decode)
    got = await collect(await llm.generate(_request(logprobs=2)))
    alone = await collect(await MockLlm().generate(_request(logprobs=2)))
    assert got.token_ids == alone.token_ids and got.finish_reason == FinishReason.LENGTH

    [p] = prefill.requests
    assert p.sampling_params.max_tokens == 1 and p.sampling_params.min_tokens == 0
    assert p.sampling_params.logprobs is None
    assert p.kv_transfer_params == PREFILL_KV_TRANSFER_PARAMS
    [d] = decode.requests
    # the decode leg carries what the prefill leg answered (the mock echoes the params it was given)
    assert d.kv_transfer_params == PREFILL_KV_TRANSFER_PARAMS
    assert d.sampling_params == _request(logprobs=2).sampling_params
    await llm.shutdown()


async def test_prompt_logprobs_come_from_the_prefill_leg() -> None:
    prefill, decode = MockLlm(), MockLlm()
    llm = DisaggregatedLlm(prefill, decode)
    got = await collect(await llm.generate(_request(prompt_logprobs=1)))
    [d] = decode.requests
    assert d.sampling_params.prompt_logprobs is None  # the decode worker does not compute the prompt
    assert prefill.requests[0].sampling_params.prompt_logprobs == 1
    first = got.outputs[0].prompt_info
    alone = (await collect(await MockLlm().generate(_request(prompt_logprobs=1)))).outputs[0].prompt_info
    assert first is not None and alone is not None and alone.prompt_logprobs
    assert first.prompt_logprobs == alone.prompt_logprobs
    await llm.shutdown()


async def test_client_kv_transfer_params_are_refused() -> None:
    llm = DisaggregatedLlm(MockLlm(), MockLlm())
    request = _request()
    request.kv_transfer_params = {"do_remote_prefill": True}
    with pytest.raises(InvalidRequest, match="kv_transfer_params"):
        await llm.generate(request)
    await llm.shutdown()


async def test_prompt_ids_forwarded_by_a_client_are_both_legs_prompt(tiny_model_dir: Path) -> None:
    # A chat request to the router that forwards prompt ids (vLLM's decode-stage reuse): the chat layer
    # takes them as the prompt and out of kv_transfer_params, so both legs get the same ids, and the
    # kv_transfer_params each leg gets are this flow's own.
    prefill, decode = tiny_mock(tiny_model_dir), tiny_mock(tiny_model_dir)
    llm = DisaggregatedLlm(prefill, decode)
    chat = ChatLlm(TextLlm(llm))
    ids = [5, 17, 42, 99, 7]
    request = ChatRequest(
        request_id="fwd",
        messages=[ChatMessage(role="user", content="Hi")],
        kv_transfer_params={"prompt_token_ids": ids},
    )
    result = await chat.complete(request)
    assert result.prompt.prompt_token_ids == ids
    [p], [d] = prefill.requests, decode.requests
    assert p.prompt_token_ids == d.prompt_token_ids == ids
    assert p.kv_transfer_params == d.kv_transfer_params == PREFILL_KV_TRANSFER_PARAMS
    request.kv_transfer_params = {"prompt_token_ids": ids, "do_remote_prefill": True}
    with pytest.raises(InvalidRequest, match="kv_transfer_params"):  # the rest is still the client's own
        await chat.generate(request)
    await llm.shutdown()


async def test_a_prefill_answer_without_transfer_params_is_a_server_error() -> None:
    class NoConnector(MockLlm):
        async def generate(self, request: GenerateRequest):  # type: ignore[no-untyped-def]
            return await super().generate(
                GenerateRequest(
                    request_id=request.request_id,
                    prompt_token_ids=request.prompt_token_ids,
                    sampling_params=request.sampling_params,
                )
            )

    decode = MockLlm()
    llm = DisaggregatedLlm(NoConnector(), decode)
    with pytest.raises(LlmError, match="--kv-transfer-config") as caught:
        await llm.generate(_request())
    assert type(caught.value) is LlmError  # a 500: the deployment is wrong, not the request
    assert decode.requests == []
    await llm.shutdown()


async def test_abort_during_the_prefill_leg_ends_the_stream_with_abort() -> None:
    prefill, decode = MockLlm(), MockLlm()
    prefill.pause()  # the prefill leg waits
    llm = DisaggregatedLlm(prefill, decode)
    started = asyncio.create_task(llm.generate(_request("a")))
    await prefill.subscribe_running().wait_for(lambda n: n == 1)
    await llm.abort(["a"])
    got = await collect(await started)
    assert got.finish_reason == FinishReason.ABORT and got.token_ids == []
    assert decode.requests == [] and prefill.num_running == 0
    await llm.shutdown()


async def test_cancelling_during_the_prefill_leg_aborts_it() -> None:
    prefill, decode = MockLlm(), MockLlm()
    prefill.pause()
    llm = DisaggregatedLlm(prefill, decode)
    started = asyncio.create_task(llm.generate(_request("c")))
    await prefill.subscribe_running().wait_for(lambda n: n == 1)
    started.cancel()
    with pytest.raises(asyncio.CancelledError):
        await started
    assert prefill.aborted == ["c"] and prefill.num_running == 0 and decode.requests == []
    await llm.shutdown()


async def test_readiness_follows_both_sides() -> None:
    prefill, decode = MockLlm(), MockLlm()
    llm = DisaggregatedLlm(prefill, decode)
    ready = llm.subscribe_readiness()
    assert ready.value is True
    prefill.pause()
    await ready.wait_for(lambda v: v is False)
    prefill.resume()
    await ready.wait_for(lambda v: v is True)
    decode.pause()
    await ready.wait_for(lambda v: v is False)
    await llm.shutdown()


async def test_abort_immediately_ends_at_once_on_a_mock() -> None:
    llm = MockLlm()
    request = _request()
    request.abort_immediately = True
    outs: list[GenerateOutput] = [o async for o in await llm.generate(request)]
    assert [o.finish_reason for o in outs] == [FinishReason.ABORT] and llm.num_running == 0


def test_workers_of_different_models_are_refused() -> None:
    info = default_info()
    check_compatible(info, info)
    other = default_info()
    other.vocab_size += 1
    with pytest.raises(IncompatibleWorkers, match="vocab_size"):
        check_compatible(info, other)


async def test_abort_reaches_only_the_side_that_runs_the_request() -> None:
    prefill, decode = MockLlm(), MockLlm()
    llm = DisaggregatedLlm(prefill, decode)
    decode.pause()  # the decode leg waits, once taken
    stream = await llm.generate(_request("d"))
    await llm.abort(["d"])
    assert decode.aborted == ["d"] and prefill.aborted == []
    assert (await collect(stream)).finish_reason == FinishReason.ABORT
    await llm.shutdown()
