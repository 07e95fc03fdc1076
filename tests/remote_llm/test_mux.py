"""GenerateMux: many requests on one stream (`vllm_server.grpc.mux`, `vllm_remote_llm._mux`).

On the wire with the generated stub (no RemoteLlm): what is pending goes out as one message, nothing is
lost or reordered, a refused request gets its status as a `MuxError` while the others run, cancel and
the stream's end abort, a draining server refuses new requests and ends the stream. Then what only
`RemoteLlm(mux=True)` does: fall back to Generate calls on a worker without the method, and send a
request again when the stream broke before its first output. The behaviour it shares with Generate
calls is `test_remote.py` and `test_idle.py`, run both ways (the `mux` fixture).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from tests.support.grpc_serving import Served, eventually, raw_client, request, serving
from vllm_llm import GenerateStream, InvalidRequest, MockLlm, Unavailable
from vllm_llm.delegating import DelegatingLlm
from vllm_llm.wire import (
    GENERATE,
    INFO,
    SERVICE_NAME,
    FinishReason,
    GenerateOutput,
    GenerateRequest,
    MuxError,
    MuxRequest,
    MuxResponse,
    decoder,
)
from vllm_remote_llm import RemoteLlm
from vllm_server.grpc.llm_service import LlmService, _method_handler
from vllm_server.grpc.mux import MuxSession
from vllm_server.metrics import Metrics, ServedRequest


async def _read_until_final(
    call: Any, ids: set[str]
) -> tuple[dict[str, list[GenerateOutput]], list[Any], int]:
    """Read messages until every id in `ids` got its final output or an error; also the number of
    messages read."""
    outputs: dict[str, list[GenerateOutput]] = {}
    errors: list[Any] = []
    messages = 0
    open_ids = set(ids)
    while open_ids:
        message = await asyncio.wait_for(call.read(), 10)
        messages += 1
        assert isinstance(message, MuxResponse), message
        ids_here = [o.request_id for o in message.outputs or ()]
        assert len(ids_here) == len(set(ids_here)), "at most one output per request per message"
        for out in message.outputs or ():
            outputs.setdefault(out.request_id, []).append(out)
            if out.finish_reason is not None:
                open_ids.discard(out.request_id)
        for error in message.errors or ():
            errors.append(error)
            open_ids.discard(error.request_id)
    return outputs, errors, messages


async def test_one_message_carries_the_outputs_of_many_requests(mock: MockLlm, served: Served) -> None:
    ids = {f"r{i}" for i in range(16)}
    async with raw_client(served.target) as (stub, _):
        call = stub.GenerateMux()
        await call.write(MuxRequest(generate=[request(rid, max_tokens=20) for rid in sorted(ids)]))
        outputs, errors, messages = await _read_until_final(call, ids)
        await call.done_writing()
        assert await asyncio.wait_for(call.read(), 5) is grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK
    assert errors == []
    prompt = request("x").prompt_token_ids
    for rid in ids:
        got = outputs[rid]
        assert [t for o in got for t in o.token_ids] == [mock.token_at(prompt, k) for k in range(20)]
        assert [o.finish_reason for o in got] == [None] * (len(got) - 1) + [FinishReason.LENGTH]
        assert got[0].prompt_info is not None
    # The mock steps all 16 together: a message per step carries many requests' outputs, so there are
    # far fewer messages than outputs (a Generate call each would take one message per output).
    assert messages < sum(len(o) for o in outputs.values()) / 4


class _Unlistenable(DelegatingLlm):
    """The inner Llm's streams, behind an async generator: a stream `listen` cannot read."""

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        inner = await self.inner.generate(request)

        async def outputs() -> AsyncIterator[GenerateOutput]:
            async for out in inner:
                yield out

        return GenerateStream(inner.request_id, outputs(), inner.aclose)


def _relay_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("mux ")]


@pytest.mark.parametrize("listened", [True, False], ids=["taken-by-the-writer", "a-task-each"])
async def test_requests_run_end_cancel_and_count_whether_or_not_their_streams_can_be_listened_to(
    mock: MockLlm, listened: bool
) -> None:
    llm = mock if listened else _Unlistenable(mock)
    metrics = Metrics("tiny", mock.info)
    ids = [f"r{i}" for i in range(8)]
    async with serving(llm, metrics=metrics) as served, raw_client(served.target) as (stub, _):
        call = stub.GenerateMux()
        await call.write(MuxRequest(generate=[request(rid, max_tokens=100_000) for rid in ids]))
        await call.write(MuxRequest(generate=[request(f"short{i}", max_tokens=6) for i in range(4)]))
        short = {f"short{i}" for i in range(4)}
        outputs, errors, _ = await _read_until_final(call, short)
        assert errors == [] and all(sum(len(o.token_ids) for o in outputs[rid]) == 6 for rid in short)
        await eventually(lambda: metrics.in_flight == 8, what="the short requests counted as ended")
        # A stream from an OutputChannel is read by the writer: no task per request while they run.
        assert len(_relay_tasks()) == (0 if listened else 8)
        await call.write(MuxRequest(cancel=["r3"]))
        await eventually(lambda: mock.aborted == ["r3"], what="the cancel aborted r3")
        await eventually(lambda: metrics.in_flight == 7, what="the cancelled request counted as ended")
        # Messages written before the cancel arrived may still be read; once one lacks r3 (the mock steps
        # every running request together), none after it carries r3, and the others still stream.
        while "r3" in {o.request_id for o in (await asyncio.wait_for(call.read(), 10)).outputs or ()}:
            pass
        for _ in range(3):
            message = await asyncio.wait_for(call.read(), 10)
            assert {o.request_id for o in message.outputs or ()} == set(ids) - {"r3"}
        call.cancel()  # the stream's end aborts every request still on it
        await eventually(lambda: sorted(mock.aborted) == sorted(ids), what="the rest aborted")
        await eventually(lambda: metrics.in_flight == 0, what="every request counted as ended")
    assert mock.num_running == 0
    assert _relay_tasks() == []
    assert 'vllm:request_success_total{engine="frontend",finished_reason="length",model_name="tiny"} 4.0' in (
        metrics.render().decode()
    )


@pytest.mark.parametrize("listened", [True, False], ids=["taken-by-the-writer", "a-task-each"])
async def test_a_failure_while_relaying_a_request_ends_it_with_an_error_and_aborts_it(
    mock: MockLlm, listened: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    output = ServedRequest.output
    outputs_of_bad = 0

    def failing(served: ServedRequest, out: GenerateOutput) -> None:
        nonlocal outputs_of_bad
        if out.request_id == "bad":
            outputs_of_bad += 1
            if outputs_of_bad == 3:
                raise RuntimeError("a bug of the relay")
        output(served, out)

    monkeypatch.setattr(ServedRequest, "output", failing)
    llm = mock if listened else _Unlistenable(mock)
    async with serving(llm) as served, raw_client(served.target) as (stub, _):
        call = stub.GenerateMux()
        await call.write(
            MuxRequest(generate=[request("bad", max_tokens=100_000), request("good", max_tokens=10)])
        )
        outputs, errors, _ = await _read_until_final(call, {"bad", "good"})
        await eventually(lambda: mock.aborted == ["bad"], what="the failed request aborted")
        assert mock.num_running == 0  # while the stream is still open
        call.cancel()
    assert [(e.request_id, e.code) for e in errors] == [("bad", "INTERNAL")]
    assert sum(len(o.token_ids) for o in outputs["bad"]) >= 2  # what came before the failure went out
    assert sum(len(o.token_ids) for o in outputs["good"]) == 10


async def test_a_refused_request_gets_its_status_while_the_others_run(mock: MockLlm, served: Served) -> None:
    async with raw_client(served.target) as (stub, _):
        call = stub.GenerateMux()
        await call.write(MuxRequest(generate=[request("good", max_tokens=30), request("bad", max_tokens=0)]))
        await call.write(MuxRequest(generate=[request("good", max_tokens=5)]))  # while it runs
        good: list[GenerateOutput] = []
        errors: list[Any] = []
        while not (good and good[-1].finish_reason is not None and len(errors) == 2):
            message = await asyncio.wait_for(call.read(), 10)
            good += [o for o in message.outputs or () if o.request_id == "good"]
            errors += message.errors or ()
        call.cancel()
    assert sorted((e.request_id, e.code) for e in errors) == [
        ("bad", "INVALID_ARGUMENT"),
        ("good", "INVALID_ARGUMENT"),
    ]
    assert any("max_tokens" in e.message for e in errors if e.request_id == "bad")
    assert any("already running" in e.message for e in errors if e.request_id == "good")
    # The first "good" ran to its end, untouched by the refused duplicate.
    assert sum(len(o.token_ids) for o in good) == 30
    assert good[-1].finish_reason == FinishReason.LENGTH


async def test_cancel_and_the_streams_end_abort_on_the_server(mock: MockLlm, served: Served) -> None:
    async with raw_client(served.target) as (stub, _):
        call = stub.GenerateMux()
        await call.write(MuxRequest(generate=[request(rid, max_tokens=100_000) for rid in ("a", "b", "c")]))
        await eventually(lambda: mock.num_running == 3, what="three running")
        await call.write(MuxRequest(cancel=["b"]))
        await eventually(lambda: mock.aborted == ["b"], what="the cancel aborted b")
        call.cancel()  # the stream's end aborts every request still on it
        await eventually(lambda: sorted(mock.aborted) == ["a", "b", "c"], what="the rest aborted")
    assert mock.num_running == 0


async def test_a_draining_server_refuses_new_requests_and_ends_the_stream(mock: MockLlm) -> None:
    async with serving(mock) as served, raw_client(served.target) as (stub, _):
        call = stub.GenerateMux()
        await call.write(MuxRequest(generate=[request("running", max_tokens=30)]))
        first = await asyncio.wait_for(call.read(), 10)
        assert [o.request_id for o in first.outputs] == ["running"]
        await served.frontend.begin_drain()
        await call.write(MuxRequest(generate=[request("late", max_tokens=3)]))
        outputs, errors, _ = await _read_until_final(call, {"running", "late"})
        assert [(e.request_id, e.code) for e in errors] == [("late", "UNAVAILABLE")]
        assert outputs["running"][-1].finish_reason == FinishReason.LENGTH
        # Every request ended and the server drains: the stream ends OK without the client half-closing.
        assert await asyncio.wait_for(call.read(), 5) is grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK


async def test_remote_llm_over_mux_delivers_what_generate_calls_do(mock: MockLlm, served: Served) -> None:
    remote = await RemoteLlm.connect(served.target, mux=True)
    try:
        streams = [await remote.generate(request(f"m{i}", max_tokens=12)) for i in range(8)]
        got = await asyncio.gather(*(_collect(s) for s in streams))
    finally:
        await remote.shutdown()
    prompt = request("x").prompt_token_ids
    for outputs in got:
        assert [t for o in outputs for t in o.token_ids] == [mock.token_at(prompt, k) for k in range(12)]
        assert outputs[-1].finish_reason == FinishReason.LENGTH


async def test_a_worker_without_generate_mux_gets_generate_calls(mock: MockLlm) -> None:
    # A worker of revision 6: the service's own handlers for Generate and Info, no GenerateMux.
    service = LlmService(mock)
    handlers = {m.name: _method_handler(m, getattr(service, m.name)) for m in (GENERATE, INFO)}
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        remote = await RemoteLlm.connect(f"127.0.0.1:{port}", mux=True, connect_timeout=10)
        try:
            for attempt in range(2):  # the first finds UNIMPLEMENTED, the second goes straight to a call
                outputs = await _collect(await remote.generate(request(f"old{attempt}", max_tokens=4)))
                assert [t for o in outputs for t in o.token_ids] == [
                    mock.token_at(request("x").prompt_token_ids, k) for k in range(4)
                ]
                assert outputs[-1].finish_reason == FinishReason.LENGTH
        finally:
            await remote.shutdown()
    finally:
        await server.stop(0)


async def test_a_stopped_server_fails_the_open_requests_and_aborts_them(mock: MockLlm) -> None:
    async with serving(mock) as served:
        remote = await RemoteLlm.connect(served.target, mux=True)
        try:
            stream = await remote.generate(request("open", max_tokens=100_000))
            await stream.__anext__()
            await served.frontend.stop(0)  # cancels the stream on the server
            with pytest.raises(Unavailable):
                await asyncio.wait_for(_collect(stream), 10)
            await eventually(lambda: mock.aborted == ["open"], what="the server aborted it")
        finally:
            await remote.shutdown()


async def test_after_a_broken_stream_the_next_request_opens_a_new_one(mock: MockLlm, served: Served) -> None:
    remote = await RemoteLlm.connect(served.target, mux=True)
    try:
        stream = await remote.generate(request("open", max_tokens=100_000))
        await stream.__anext__()
        session = remote._session
        assert session is not None
        session._call.cancel()  # as a transport failure would end it: the status reaches the reader
        with pytest.raises(Unavailable, match="GenerateMux stream"):
            await asyncio.wait_for(_collect(stream), 10)
        await eventually(lambda: mock.aborted == ["open"], what="the server aborted it")
        outputs = await _collect(await remote.generate(request("next", max_tokens=3)))
        assert outputs[-1].finish_reason == FinishReason.LENGTH
        assert remote._session is not session
    finally:
        await remote.shutdown()


async def test_an_id_already_running_is_refused_locally(mock: MockLlm, served: Served) -> None:
    remote = await RemoteLlm.connect(served.target, mux=True)
    try:
        held = await remote.generate(request("twice", max_tokens=100_000))
        with pytest.raises(InvalidRequest, match="already running"):
            await remote.generate(request("twice", max_tokens=3))
        await held.aclose()
        await eventually(lambda: mock.aborted == ["twice"], what="closing the stream aborted it")
    finally:
        await remote.shutdown()


async def test_requests_queued_together_are_split_under_the_message_limit(mock: MockLlm) -> None:
    # Each request is ~1.2 KB on the wire, the limit 4 KiB on both sides: eight started at once would be
    # one 10 KB MuxRequest, which gRPC refuses (the whole stream would fail); they go in several.
    prompt = list(range(1000, 1400))
    async with serving(mock, max_message_bytes=4096) as served:
        remote = await RemoteLlm.connect(served.target, mux=True, max_message_bytes=4096)
        try:
            streams = await asyncio.gather(
                *(remote.generate(request(f"big{i}", prompt=prompt, max_tokens=3)) for i in range(8))
            )
            got = await asyncio.gather(*(_collect(s) for s in streams))
        finally:
            await remote.shutdown()
    for outputs in got:
        assert [t for o in outputs for t in o.token_ids] == [mock.token_at(prompt, k) for k in range(3)]


class _Writes:
    """A servicer context that keeps what is written."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.written.append(data)


async def test_the_outputs_of_one_write_are_split_under_the_message_limit(mock: MockLlm) -> None:
    session = MuxSession(
        mock, metrics=None, draining=lambda: False, service=SERVICE_NAME, max_message_bytes=2048
    )
    outputs = [GenerateOutput(request_id=f"r{i}", token_ids=list(range(1000, 1300))) for i in range(10)]
    errors = [MuxError(request_id="r3", code="INTERNAL", message="after its output")]
    context = _Writes()
    await session._write(context, outputs, errors)
    messages = [decoder(MuxResponse).decode(data) for data in context.written]
    assert len(messages) > 1 and all(len(data) <= 2048 for data in context.written)
    assert [o for m in messages for o in m.outputs or ()] == outputs  # nothing lost or reordered
    assert [e for m in messages for e in m.errors or ()] == errors
    assert messages[-1].errors == errors  # the errors go last, after their requests' outputs


async def _collect(stream: AsyncIterator[GenerateOutput]) -> list[GenerateOutput]:
    return [o async for o in stream]
