"""RemoteLlm against one GrpcFrontend: adopted info, aborts, readiness, revisions and error mapping."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from tests.support.grpc_serving import Served, eventually, request, serving
from vllm_llm import (
    AdmissionRefused,
    InvalidRequest,
    LlmError,
    MockLlm,
    Remote,
    RemoteInvalidRequest,
    Unavailable,
    Unsupported,
)
from vllm_llm.mock import default_info
from vllm_llm.wire import (
    WIRE_REVISION,
    FinishReason,
    GenerateRequest,
    GenerationDefaults,
    LlmInfo,
    ModelDtype,
)
from vllm_remote_llm import RemoteLlm, WireRevisionMismatch


@pytest_asyncio.fixture
async def remote(served: Served, mux: bool) -> AsyncIterator[RemoteLlm]:
    llm = await RemoteLlm.connect(served.target, connect_timeout=10, mux=mux)
    yield llm
    await llm.shutdown()


@pytest.mark.parametrize("form", ["{host}:{port}", "ipv4:{host}:{port}", "dns:///localhost:{port}"])
async def test_any_grpc_target_string(form: str, mock: MockLlm, served: Served) -> None:
    remote = await RemoteLlm.connect(form.format(host="127.0.0.1", port=served.port), connect_timeout=10)
    outputs = [o async for o in await remote.generate(request(form, max_tokens=2))]
    assert outputs[-1].finish_reason == FinishReason.LENGTH
    await remote.shutdown()


def info(**changes: Any) -> LlmInfo:
    base = default_info()
    fields = {f: getattr(base, f) for f in base.__struct_fields__}
    return LlmInfo(**(fields | changes))


async def test_adopts_the_server_llm_info_with_its_dtype() -> None:
    served_info = info(
        served_model_name="served-name",
        dtype=ModelDtype.BFLOAT16,
        max_model_len=1234,
        eos_token_ids=[2, 7],
        generation_defaults=GenerationDefaults(temperature=0.6),
        vllm_version="0.32.0",
        supports_lora=True,
        max_loras=3,
    )
    llm = MockLlm(info=served_info)
    async with serving(llm) as served:
        remote = await RemoteLlm.connect(served.target)
        assert remote.info() == served_info
        assert remote.info().dtype == ModelDtype.BFLOAT16
        await remote.shutdown()
    await llm.shutdown()


async def test_abort_by_external_id_reaches_the_server(mock: MockLlm, remote: RemoteLlm) -> None:
    # A request this RemoteLlm did not start: only the server's Abort can end it.
    stream = await mock.generate(request("elsewhere", max_tokens=100_000))
    await stream.__anext__()
    await remote.abort(["elsewhere"])
    rest = await asyncio.wait_for(_collect(stream), 5)
    assert rest[-1].finish_reason == FinishReason.ABORT
    assert mock.aborted == ["elsewhere"]


async def test_abort_of_own_stream_aborts_on_the_server(mock: MockLlm, remote: RemoteLlm) -> None:
    stream = await remote.generate(request("mine", max_tokens=100_000))
    await stream.__anext__()
    await remote.abort(["mine"])
    rest = await asyncio.wait_for(_collect(stream), 5)
    assert rest[-1].finish_reason == FinishReason.ABORT
    await eventually(lambda: mock.aborted == ["mine"] and mock.num_running == 0, what="server-side abort")


async def hold_first_outputs(mock: MockLlm) -> Any:
    """Keep the mock ready but make new requests wait (seconds) for their first output.

    A running request keeps the step loop asleep between steps; requests arriving meanwhile get their
    first token only at the next step.
    """
    mock.step_interval = 5.0
    blocker = await mock.generate(request("blocker", max_tokens=100))
    await blocker.__anext__()
    return blocker


async def test_abort_while_waiting_for_the_first_output(mock: MockLlm, remote: RemoteLlm) -> None:
    blocker = await hold_first_outputs(mock)
    generating = asyncio.ensure_future(remote.generate(request("early", max_tokens=5)))
    await eventually(lambda: len(mock.requests) == 2, what="the request reached the server")
    await remote.abort(["early"])
    stream = await asyncio.wait_for(generating, 5)
    outputs = await _collect(stream)
    assert [o.finish_reason for o in outputs] == [FinishReason.ABORT]
    await eventually(lambda: mock.aborted == ["early"], what="server-side abort")
    await blocker.aclose()


async def test_cancelling_the_consumer_cancels_the_call(mock: MockLlm, remote: RemoteLlm) -> None:
    stream = await remote.generate(request("consumer", max_tokens=100_000))
    reading = asyncio.Event()

    async def consume() -> None:
        async for _ in stream:
            reading.set()  # and back into the stream for the next output, where the cancel finds it

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(reading.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await eventually(lambda: mock.aborted == ["consumer"] and mock.num_running == 0, what="server-side abort")


async def test_empty_abort_is_rejected_locally(remote: RemoteLlm) -> None:
    with pytest.raises(InvalidRequest) as err:
        await remote.abort([])
    assert type(err.value) is InvalidRequest  # not RemoteInvalidRequest: no call was made


async def test_pausing_the_server_turns_it_unready_and_back_while_healthy(
    mock: MockLlm, remote: RemoteLlm
) -> None:
    readiness, health = remote.subscribe_readiness(), remote.subscribe_health()
    assert readiness.value is True
    mock.pause()
    await asyncio.wait_for(readiness.wait_for(lambda ready: not ready), 5)
    assert health.value is True
    mock.resume()
    await asyncio.wait_for(readiness.wait_for(bool), 5)
    mock.fail()
    await asyncio.wait_for(readiness.wait_for(lambda ready: not ready), 5)
    assert health.value is True


async def test_a_stopped_server_makes_it_unready_not_failed(served: Served, remote: RemoteLlm) -> None:
    await served.frontend.stop(0)
    await asyncio.wait_for(remote.subscribe_readiness().wait_for(lambda ready: not ready), 5)
    assert remote.subscribe_health().value is True
    with pytest.raises(Unavailable):
        await remote.generate(request("nobody"))


@pytest.mark.parametrize("offset", [2, -2, 5])
async def test_a_server_more_than_one_revision_away_is_refused(offset: int) -> None:
    llm = MockLlm(info=info(wire_revision=WIRE_REVISION + offset))
    async with serving(llm) as served:
        with pytest.raises(WireRevisionMismatch) as err:
            await RemoteLlm.connect(served.target)
    assert f"wire revision {WIRE_REVISION + offset}" in str(err.value)
    assert f"wire revision {WIRE_REVISION}" in str(err.value)
    assert (err.value.server_revision, err.value.client_revision) == (WIRE_REVISION + offset, WIRE_REVISION)
    await llm.shutdown()


async def test_an_adjacent_revision_is_accepted() -> None:
    llm = MockLlm(info=info(wire_revision=WIRE_REVISION + 1))
    async with serving(llm) as served:
        remote = await RemoteLlm.connect(served.target)
        assert remote.info().wire_revision == WIRE_REVISION + 1
        await remote.shutdown()
    await llm.shutdown()


async def test_validation_errors_of_the_server_raise_from_generate(remote: RemoteLlm) -> None:
    with pytest.raises(RemoteInvalidRequest, match="max_tokens"):
        await remote.generate(request("invalid", max_tokens=0))
    with pytest.raises(RemoteInvalidRequest, match="top_p"):
        await remote.generate(request("invalid", top_p=0.0))


class RaisingLlm(MockLlm):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def generate(self, request: GenerateRequest) -> Any:
        raise self.error


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (Unsupported("no multimodal here"), Unsupported),
        (Unavailable("not now"), Unavailable),
        # A queue limit's refusal names its limit (trailing metadata, MuxError.refusal): the same error.
        (AdmissionRefused("max_num_queued_reqs"), AdmissionRefused),
        (AdmissionRefused("max_num_queued_tokens"), AdmissionRefused),
        (LlmError("engine trouble"), Remote),
    ],
)
async def test_status_codes_map_back_to_errors(
    error: Exception, expected: type[Exception], mux: bool
) -> None:
    llm = RaisingLlm(error)
    async with serving(llm) as served:
        remote = await RemoteLlm.connect(served.target, mux=mux)
        with pytest.raises(expected) as err:
            await remote.generate(request("x"))
        assert type(err.value) is expected
        assert str(err.value) == str(error)
        if isinstance(err.value, Remote):
            assert err.value.code == "INTERNAL"
        if isinstance(error, AdmissionRefused):
            assert isinstance(err.value, AdmissionRefused) and err.value.reason == error.reason
        await remote.shutdown()
    await llm.shutdown()


async def test_a_failing_engine_mid_stream_is_remote_internal(mock: MockLlm, remote: RemoteLlm) -> None:
    stream = await remote.generate(request("mid", max_tokens=100_000))
    await stream.__anext__()
    mock.fail("engine exploded")
    with pytest.raises(Remote) as err:
        await _collect(stream)
    assert (err.value.code, err.value.message) == ("INTERNAL", "engine exploded")


async def test_time_to_first_output_is_bounded_by_the_timeout(
    mock: MockLlm, served: Served, mux: bool
) -> None:
    remote = await RemoteLlm.connect(served.target, timeout=0.2, mux=mux)
    blocker = await hold_first_outputs(mock)
    # RemoteLlm reads the first output before handing the stream out (a worker failing before it is
    # failed over), so the bound fires in `generate`
    with pytest.raises(Unavailable, match=r"no output from the server within 0\.2 s"):
        await remote.generate(request("slow", max_tokens=5))
    await eventually(lambda: mock.aborted == ["slow"], what="the slow call was cancelled on the server")
    await blocker.aclose()
    await remote.shutdown()


async def test_connect_to_nothing_fails_after_the_connect_timeout() -> None:
    with pytest.raises(Unavailable, match=r"within 0\.3 s"):
        await RemoteLlm.connect("127.0.0.1:1", connect_timeout=0.3)


async def test_shutdown_closes_everything(remote: RemoteLlm, mock: MockLlm) -> None:
    stream = await remote.generate(request("open", max_tokens=100_000))
    await stream.__anext__()
    await remote.shutdown()
    await eventually(lambda: mock.num_running == 0, what="the open call was cancelled")
    with pytest.raises(Unavailable):
        await remote.generate(request("late"))
    await remote.shutdown()  # idempotent


async def _collect(stream: Any) -> list[Any]:
    return [o async for o in stream]
