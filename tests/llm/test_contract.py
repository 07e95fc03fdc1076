"""The Llm contract, run against every implementation (see conftest.IMPLEMENTATIONS)."""

from __future__ import annotations

import asyncio

import pytest

from tests.llm.harness import Harness, collect
from tests.support.timing import PATIENCE
from vllm_llm import InvalidRequest, PromptTooLong
from vllm_llm.wire import WIRE_REVISION, FinishReason


async def test_info_describes_the_model(harness: Harness) -> None:
    info = harness.llm.info()
    assert info.wire_revision == WIRE_REVISION
    assert info.max_model_len > len(harness.prompt)
    assert info.vocab_size > max(harness.prompt)
    assert info.served_model_name


async def test_healthy_and_ready(harness: Harness) -> None:
    assert harness.llm.subscribe_health().value is True
    assert harness.llm.subscribe_readiness().value is True


async def test_stream_is_delta_and_ends_with_the_finish_reason(harness: Harness) -> None:
    stream = await harness.llm.generate(harness.request("delta", max_tokens=6, ignore_eos=True))
    got = await collect(stream)
    assert got.finish_reason == FinishReason.LENGTH
    assert len(got.token_ids) == 6
    assert all(o.finish_reason is None for o in got.outputs[:-1])
    first = got.outputs[0]
    assert first.prompt_info is not None
    assert first.prompt_info.num_prompt_tokens == len(harness.prompt)
    assert all(o.prompt_info is None for o in got.outputs[1:])
    assert all(o.request_id == "delta" for o in got.outputs)
    # Nothing after the final output.
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_greedy_generation_is_deterministic(harness: Harness) -> None:
    a = await collect(await harness.llm.generate(harness.request("det-a", max_tokens=10, ignore_eos=True)))
    b = await collect(await harness.llm.generate(harness.request("det-b", max_tokens=10, ignore_eos=True)))
    assert a.token_ids == b.token_ids


async def test_stop_token_ids(harness: Harness) -> None:
    free = await collect(await harness.llm.generate(harness.request("free", max_tokens=10, ignore_eos=True)))
    index = next(i for i, t in enumerate(free.token_ids) if free.token_ids.index(t) == i and i >= 2)
    stop = free.token_ids[index]
    got = await collect(
        await harness.llm.generate(
            harness.request("stopped", max_tokens=10, ignore_eos=True, stop_token_ids=[stop])
        )
    )
    assert got.token_ids == free.token_ids[: index + 1]
    assert got.finish_reason == FinishReason.STOP
    assert got.final.stop_reason == stop


async def test_logprobs_rows(harness: Harness) -> None:
    got = await collect(
        await harness.llm.generate(harness.request("lp", max_tokens=4, ignore_eos=True, logprobs=3))
    )
    rows = [r for o in got.outputs for r in (o.logprobs or [])]
    assert len(rows) == len(got.token_ids) == 4
    for token, row in zip(got.token_ids, rows, strict=True):
        assert row.token_ids[0] == token
        assert len(row.token_ids) == len(row.logprobs) == 4
        assert row.rank >= 1
        assert all(lp <= 0.0 for lp in row.logprobs)


async def test_stream_interval_batches_outputs_and_loses_nothing(harness: Harness) -> None:
    """vLLM's stream interval: the first and the final output at once, every other one >= N tokens."""
    every = await collect(await harness.llm.generate(harness.request("si-1", max_tokens=11, ignore_eos=True)))
    got = await collect(
        await harness.llm.generate(
            harness.request("si-4", max_tokens=11, ignore_eos=True, logprobs=1, stream_interval=4)
        )
    )
    assert got.token_ids == every.token_ids
    assert got.finish_reason == FinishReason.LENGTH
    middle = got.outputs[1:-1]
    assert middle, [len(o.token_ids) for o in got.outputs]
    assert all(len(o.token_ids) >= 4 for o in middle), [len(o.token_ids) for o in got.outputs]
    assert all(len(o.logprobs or ()) == len(o.token_ids) for o in got.outputs)
    assert got.outputs[0].prompt_info is not None


async def test_abort_mid_stream_ends_with_abort_and_leaves_no_state(harness: Harness) -> None:
    stream = await harness.llm.generate(harness.request("to-abort", max_tokens=400, ignore_eos=True))
    first = await stream.__anext__()
    assert first.finish_reason is None
    await harness.llm.abort(["to-abort"])
    rest = [o async for o in stream]
    assert rest[-1].finish_reason == FinishReason.ABORT
    assert await harness.in_flight() == 0


async def test_closing_a_stream_early_aborts_it(harness: Harness) -> None:
    async with await harness.llm.generate(
        harness.request("closed", max_tokens=400, ignore_eos=True)
    ) as stream:
        await stream.__anext__()
    assert await harness.in_flight() == 0
    stream = await harness.llm.generate(harness.request("closed-2", max_tokens=400, ignore_eos=True))
    await stream.__anext__()
    await stream.aclose()
    assert await harness.in_flight() == 0


async def test_duplicate_external_ids_both_complete(harness: Harness) -> None:
    a, b = await asyncio.gather(
        harness.llm.generate(harness.request("same", max_tokens=5, ignore_eos=True)),
        harness.llm.generate(harness.request("same", max_tokens=5, ignore_eos=True)),
    )
    got_a, got_b = await asyncio.gather(collect(a), collect(b))
    assert got_a.finish_reason == got_b.finish_reason == FinishReason.LENGTH
    assert got_a.token_ids == got_b.token_ids
    assert len(got_a.token_ids) == 5


async def test_abort_of_unknown_ids_is_harmless(harness: Harness) -> None:
    await harness.llm.abort(["never-sent"])
    got = await collect(await harness.llm.generate(harness.request("after", max_tokens=2, ignore_eos=True)))
    assert got.finish_reason == FinishReason.LENGTH


async def test_validation_errors_raise_before_the_first_output(harness: Harness) -> None:
    with pytest.raises(InvalidRequest):
        await harness.llm.generate(harness.request("empty", prompt=[]))
    too_long = [5] * harness.llm.info().max_model_len
    with pytest.raises(PromptTooLong):
        await harness.llm.generate(harness.request("long", prompt=too_long))
    with pytest.raises(InvalidRequest):
        await harness.llm.generate(harness.request("bad-id", prompt=[harness.llm.info().vocab_size + 5]))
    assert await harness.in_flight() == 0


async def test_pause_turns_readiness_false_and_resume_back(harness: Harness) -> None:
    readiness = harness.llm.subscribe_readiness()
    await harness.pause()
    assert await asyncio.wait_for(readiness.wait_for(lambda ready: not ready), 30) is False
    await harness.resume()
    assert await asyncio.wait_for(readiness.wait_for(bool), 30) is True
    assert harness.llm.subscribe_health().value is True


async def test_a_reader_cancelled_mid_read_still_aborts_on_close(harness: Harness) -> None:
    stream = await harness.llm.generate(harness.request("cancelled", max_tokens=400, ignore_eos=True))
    await stream.__anext__()
    reading = asyncio.Event()

    async def read_all() -> None:
        async for _ in stream:
            reading.set()  # and back into the stream for the next output, where the cancel finds it

    reader = asyncio.ensure_future(read_all())
    await asyncio.wait_for(reading.wait(), PATIENCE)
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    await stream.aclose()
    assert await harness.in_flight() == 0


#: The implementations whose streams come from an `OutputChannel`, so a reader can `listen` and `take`
#: instead of awaiting each output (a GenerateMux worker reads them so); the others' `listen` says no.
#: A disaggregated request that the prefill leaves nothing to add to is its decode Llm's stream.
LISTENABLE = {"mock", "engine_core", "disaggregated_mock"}


async def test_a_stream_taken_when_ready_delivers_what_reading_it_does(harness: Harness) -> None:
    read = await collect(await harness.llm.generate(harness.request("read", max_tokens=12, ignore_eos=True)))
    stream = await harness.llm.generate(harness.request("taken", max_tokens=12, ignore_eos=True))
    seen: list[int] = []
    stream.observe(lambda out: seen.extend(out.token_ids))
    ready = asyncio.Event()
    listened = stream.listen(ready.set)
    assert listened is (harness.name in LISTENABLE)
    if not listened:
        taken = (await collect(stream)).outputs  # a stream that cannot be listened to reads as before
    else:
        taken = []
        while not stream.finished:
            await asyncio.wait_for(ready.wait(), PATIENCE)
            ready.clear()
            while (out := stream.take()) is not None:
                taken.append(out)
        assert stream.take() is None  # nothing after the final output
    assert [t for o in taken for t in o.token_ids] == read.token_ids
    assert [o.finish_reason for o in taken] == [None] * (len(taken) - 1) + [FinishReason.LENGTH]
    assert taken[0].prompt_info is not None
    assert seen == read.token_ids  # the observer saw each output once, either way


async def test_closing_a_listened_stream_early_aborts_it(harness: Harness) -> None:
    stream = await harness.llm.generate(harness.request("listened", max_tokens=400, ignore_eos=True))
    ready = asyncio.Event()
    if stream.listen(ready.set):
        await asyncio.wait_for(ready.wait(), PATIENCE)
        first = stream.take()
        assert first is not None and first.finish_reason is None
    else:
        await stream.__anext__()
    await stream.aclose()
    assert await harness.in_flight() == 0
