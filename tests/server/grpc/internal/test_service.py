"""The vllm.internal.Llm servicer over a MockLlm: streaming, cancellation, Info, Abort and status codes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest

from tests.support.grpc_serving import Served, eventually, raw_client, request, serving
from tests.support.timing import MARGIN
from vllm_llm import EngineDead, LlmError, MockLlm, Unavailable, Unsupported
from vllm_llm.wire import AbortRequest, FinishReason, GenerateOutput, GenerateRequest, InfoRequest
from vllm_remote_llm import LlmStub

Stubs = tuple[LlmStub, Any]


class RaisingLlm(MockLlm):
    """A MockLlm whose `generate` raises a given error."""

    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def generate(self, request: GenerateRequest) -> Any:
        raise self.error


async def read_all(call: Any) -> list[GenerateOutput]:
    """Read a Generate call to its end (with `read`, so it may follow earlier reads)."""
    outputs = []
    while (out := await call.read()) is not grpc.aio.EOF:
        outputs.append(out)
    return outputs


async def test_generate_streams_the_llm_outputs(mock: MockLlm, stubs: Stubs) -> None:
    stub, _ = stubs
    outputs = await read_all(stub.Generate(request("rt", max_tokens=6)))
    tokens = [t for o in outputs for t in o.token_ids]
    assert tokens == [mock.token_at([5, 17, 42, 99, 7], i) for i in range(6)]
    assert outputs[-1].finish_reason == FinishReason.LENGTH
    assert outputs[0].prompt_info is not None
    assert all(o.request_id == "rt" for o in outputs)
    assert mock.requests[-1] == request("rt", max_tokens=6)


@pytest.mark.parametrize("how", ["cancel", "deadline", "channel_closed"])
async def test_a_cancelled_call_aborts_the_request(how: str, mock: MockLlm, served: Served) -> None:
    async with raw_client(served.target) as (stub, _):
        timeout = 0.3 if how == "deadline" else None
        call = stub.Generate(request("gone", max_tokens=100_000), timeout=timeout)
        first = await call.read()
        assert first.finish_reason is None
        if how == "cancel":
            call.cancel()
        elif how == "deadline":
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await read_all(call)
            assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    await eventually(lambda: mock.num_running == 0, what="the request was aborted")
    assert mock.aborted == ["gone"]


async def test_abort_by_id_ends_the_stream_with_abort(mock: MockLlm, stubs: Stubs) -> None:
    stub, _ = stubs
    call = stub.Generate(request("victim", max_tokens=100_000))
    await call.read()
    await stub.Abort(AbortRequest(request_ids=["victim", "unknown"]))
    rest = await read_all(call)
    assert rest[-1].finish_reason == FinishReason.ABORT
    assert mock.aborted == ["victim"]


async def test_abort_with_no_ids_is_invalid(stubs: Stubs) -> None:
    stub, _ = stubs
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await stub.Abort(AbortRequest(request_ids=[]))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "request_ids must not be empty" in (err.value.details() or "")


async def test_info_is_the_llm_info(mock: MockLlm, stubs: Stubs) -> None:
    stub, _ = stubs
    assert await stub.Info(InfoRequest()) == mock.info()


async def test_validation_error_is_invalid_argument_before_any_output(stubs: Stubs) -> None:
    stub, _ = stubs
    call = stub.Generate(request("bad", max_tokens=0))
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call.read()
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_tokens" in (err.value.details() or "")


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (Unsupported("no multimodal here"), grpc.StatusCode.UNIMPLEMENTED),
        (Unavailable("not now"), grpc.StatusCode.UNAVAILABLE),
        (EngineDead("gone for good"), grpc.StatusCode.INTERNAL),
        (LlmError("something else"), grpc.StatusCode.INTERNAL),
    ],
)
async def test_llm_errors_map_to_status_codes(error: Exception, code: grpc.StatusCode) -> None:
    llm = RaisingLlm(error)
    async with serving(llm) as served, raw_client(served.target) as (stub, _):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await read_all(stub.Generate(request("x")))
    assert err.value.code() == code
    assert err.value.details() == str(error)
    await llm.shutdown()


async def test_unexpected_errors_are_internal_without_details() -> None:
    llm = RaisingLlm(RuntimeError("a secret stack detail"))
    async with serving(llm) as served, raw_client(served.target) as (stub, _):
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await read_all(stub.Generate(request("x")))
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert "secret" not in (err.value.details() or "")
    await llm.shutdown()


async def test_a_failed_engine_is_internal(mock: MockLlm, stubs: Stubs) -> None:
    stub, _ = stubs
    call = stub.Generate(request("mid", max_tokens=100_000))
    await call.read()
    mock.fail("engine exploded")
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await read_all(call)
    assert err.value.code() == grpc.StatusCode.INTERNAL
    assert err.value.details() == "engine exploded"
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await read_all(stub.Generate(request("after")))
    assert err.value.code() == grpc.StatusCode.INTERNAL


async def test_a_shut_down_llm_is_unavailable(mock: MockLlm, stubs: Stubs) -> None:
    stub, _ = stubs
    await mock.shutdown()
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await read_all(stub.Generate(request("late")))
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_drain_refuses_new_calls_and_lets_running_ones_finish(mock: MockLlm, served: Served) -> None:
    mock.step_interval = 0.005
    async with raw_client(served.target) as (stub, _):
        running = stub.Generate(request("running", max_tokens=40))
        await running.read()
        await served.frontend.begin_drain()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await read_all(stub.Generate(request("new")))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        rest = await read_all(running)
    assert rest[-1].finish_reason == FinishReason.LENGTH
    assert [r.request_id for r in mock.requests] == ["running"]


async def test_stop_cancels_calls_after_the_grace(mock: MockLlm) -> None:
    grace = 0.5
    mock.step_interval = 0.005
    async with serving(mock) as served, raw_client(served.target) as (stub, _):
        short = stub.Generate(request("short", max_tokens=20))
        endless = stub.Generate(request("endless", max_tokens=100_000))
        await asyncio.gather(short.read(), endless.read())
        started = time.monotonic()
        await served.frontend.stop(grace)
        # The endless request (100,000 steps) holds the stop for the whole grace, and not much longer.
        assert grace - 0.1 < time.monotonic() - started < grace + MARGIN
        assert (await read_all(short))[-1].finish_reason == FinishReason.LENGTH
        with pytest.raises(grpc.aio.AioRpcError):
            await read_all(endless)
    await eventually(lambda: mock.num_running == 0, what="the endless request was aborted")
    assert mock.aborted == ["endless"]


async def test_a_second_server_cannot_take_the_same_port(mock: MockLlm, served: Served) -> None:
    other = type(served.frontend)(mock)
    with pytest.raises(RuntimeError):
        await other.start("127.0.0.1", served.port)
    await other.stop(0)
