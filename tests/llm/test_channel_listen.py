"""Reading an `OutputChannel` (and a `GenerateStream` over one) without a task: `listen` and `take`.

The contract suite reads every Llm's streams this way (`test_contract.py`); here the channel's edges: a
listener added while outputs already wait is told at once, outputs that wait are coalesced, and an
error is raised once the outputs before it were taken.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from vllm_llm import GenerateStream, LlmError, OutputChannel
from vllm_llm.wire import FinishReason, GenerateOutput


def _out(*ids: int, final: bool = False) -> GenerateOutput:
    return GenerateOutput(
        request_id="r", token_ids=list(ids), finish_reason=FinishReason.LENGTH if final else None
    )


async def _never_aborted() -> None:
    raise AssertionError("a stream that ended must not abort")


def test_a_listener_is_told_at_once_of_outputs_already_waiting_and_of_each_put() -> None:
    channel = OutputChannel()
    channel.put(_out(1))
    told: list[int] = []
    channel.listen(lambda: told.append(len(told)))
    assert told == [0]
    channel.put(_out(2))  # coalesced with the output still waiting
    channel.put(_out(3, final=True))
    assert told == [0, 1, 2]
    assert channel.take() == _out(1, 2, 3, final=True)
    assert channel.take() is None


def test_a_listener_is_told_of_a_failure_raised_after_the_outputs_before_it() -> None:
    channel = OutputChannel()
    told: list[None] = []
    channel.listen(lambda: told.append(None))
    assert told == []  # nothing waits yet
    channel.put(_out(1))
    channel.fail(LlmError("the engine died"))
    assert len(told) == 2
    assert channel.take() == _out(1)
    with pytest.raises(LlmError, match="the engine died"):
        channel.take()


async def test_a_stream_taken_ends_after_its_final_output_or_its_error() -> None:
    channel = OutputChannel()
    stream = GenerateStream("r", channel, _never_aborted)
    seen: list[GenerateOutput] = []
    stream.observe(seen.append)
    assert stream.listen(lambda: None)
    assert stream.take() is None and not stream.finished
    channel.put(_out(1))
    channel.put(_out(2, final=True))
    assert stream.take() == _out(1, 2, final=True)
    assert stream.finished and stream.take() is None
    assert seen == [_out(1, 2, final=True)]
    await stream.aclose()  # ended: nothing to abort

    failing = OutputChannel()
    stream = GenerateStream("r", failing, _never_aborted)
    assert stream.listen(lambda: None)
    failing.fail(LlmError("gone"))
    with pytest.raises(LlmError, match="gone"):
        stream.take()
    assert stream.finished and stream.take() is None
    await stream.aclose()


async def test_a_stream_that_ended_or_is_not_a_channel_cannot_be_listened_to() -> None:
    async def outputs() -> AsyncIterator[GenerateOutput]:
        yield _out(1, final=True)

    assert not GenerateStream("r", outputs(), _never_aborted).listen(lambda: None)
    aborted: list[None] = []

    async def abort() -> None:
        aborted.append(None)

    closed = GenerateStream("r", OutputChannel(), abort)
    await closed.aclose()
    assert aborted == [None]
    assert not closed.listen(lambda: None)
