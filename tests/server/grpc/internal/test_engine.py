"""The vllm.internal.Llm servicer over the session's EngineCoreLlm (the real engine core, tiny model)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
import pytest_asyncio

from tests.support.grpc_serving import SERVING, eventually, health_request, raw_client, request, serving
from tests.support.timing import PATIENCE
from vllm_llm.engine_core import EngineCoreLlm
from vllm_llm.wire import SERVICE_NAME, AbortRequest, FinishReason, InfoRequest, ModelDtype
from vllm_remote_llm import LlmStub

PROMPT = [1, 286, 669, 596, 267, 653, 650]


@pytest_asyncio.fixture
async def stubs(engine_llm: EngineCoreLlm) -> AsyncIterator[tuple[LlmStub, Any]]:
    async with serving(engine_llm) as served, raw_client(served.target) as pair:
        yield pair
    assert engine_llm.num_in_flight == 0


async def read_all(call: Any) -> list[Any]:
    outputs = []
    while (out := await call.read()) is not grpc.aio.EOF:
        outputs.append(out)
    return outputs


async def test_generate_matches_the_engine_directly(
    engine_llm: EngineCoreLlm, stubs: tuple[LlmStub, Any]
) -> None:
    stub, health = stubs
    assert (await health.Check(health_request(SERVICE_NAME))).status == SERVING
    req = request("engine-rt", prompt=PROMPT, max_tokens=12, logprobs=2)
    remote = await read_all(stub.Generate(req))
    local = [o async for o in await engine_llm.generate(req)]
    assert [t for o in remote for t in o.token_ids] == [t for o in local for t in o.token_ids]
    assert [r.token_ids for o in remote for r in o.logprobs or []] == [
        r.token_ids for o in local for r in o.logprobs or []
    ]
    assert remote[-1].finish_reason == FinishReason.LENGTH


async def test_cancel_and_abort_end_the_requests_in_the_engine(
    engine_llm: EngineCoreLlm, stubs: tuple[LlmStub, Any]
) -> None:
    """A cancelled call and an Abort end their requests in the engine core itself, not only here: its
    scheduler runs their twin alone (same max_tokens, started first, read to its end) while the twin has
    made less than half its tokens. Had they run on, they would have run as long as the twin."""
    stub, _ = stubs
    twin = await engine_llm.generate(request("engine-twin", prompt=PROMPT, max_tokens=400))
    made = [0]

    async def read_twin() -> FinishReason | None:
        async for out in twin:
            made[0] += len(out.token_ids)
            if out.finish_reason is not None:
                return out.finish_reason
        return None

    twin_task = asyncio.create_task(read_twin())
    await eventually(lambda: made[0] > 0, within=PATIENCE, what="the twin's first token")
    cancelled = stub.Generate(request("engine-cancel", prompt=PROMPT, max_tokens=400))
    aborted = stub.Generate(request("engine-abort", prompt=PROMPT, max_tokens=400))
    await cancelled.read()
    await aborted.read()
    assert _engine_load(engine_llm) == 3  # the engine runs all three
    cancelled.cancel()
    await stub.Abort(AbortRequest(request_ids=["engine-abort"]))
    assert (await read_all(aborted))[-1].finish_reason == FinishReason.ABORT
    await eventually(lambda: _engine_load(engine_llm) <= 1, within=PATIENCE, what="the engine running one")
    when = made[0]
    assert await asyncio.wait_for(twin_task, PATIENCE) == FinishReason.LENGTH
    assert when < 200, f"the engine ran the requests until their twin had made {when} of 400 tokens"
    await eventually(lambda: engine_llm.num_in_flight == 0, what="the engine has nothing in flight")


def _engine_load(engine: EngineCoreLlm) -> int:
    """Requests the engine core runs or queues, as its scheduler last reported them."""
    return sum(s.num_running_reqs + s.num_waiting_reqs for s in engine.scheduler_stats.values())


async def test_info_and_validation(engine_llm: EngineCoreLlm, stubs: tuple[LlmStub, Any]) -> None:
    stub, _ = stubs
    info = await stub.Info(InfoRequest())
    assert info == engine_llm.info()
    assert (info.dtype, info.served_model_name) == (ModelDtype.FLOAT32, "tiny")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await read_all(stub.Generate(request("too-long", prompt=[5] * info.max_model_len)))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert str(info.max_model_len) in (err.value.details() or "")
