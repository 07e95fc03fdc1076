"""Coalescing in `OutputChannel` loses and reorders nothing, whatever the pace of producer and reader."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_llm import OutputChannel
from vllm_llm.wire import FinishReason, GenerateOutput, LogprobRow, PromptInfo


@dataclass(frozen=True)
class Pattern:
    """What the engine emits (token counts per step, logprobs or not) and how both sides pace."""

    tokens: list[int]
    logprobs: bool
    put_yields: list[int]
    read_yields: list[int]


@st.composite
def patterns(draw: st.DrawFn) -> Pattern:
    tokens = draw(st.lists(st.integers(0, 4), min_size=1, max_size=40))
    n = len(tokens)
    return Pattern(
        tokens=tokens,
        logprobs=draw(st.booleans()),
        put_yields=draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
        read_yields=draw(st.lists(st.integers(0, 5), min_size=n, max_size=n)),
    )


def _outputs(pattern: Pattern) -> list[GenerateOutput]:
    outs = []
    next_token = 100
    for step, count in enumerate(pattern.tokens):
        ids = list(range(next_token, next_token + count))
        next_token += count
        last = step == len(pattern.tokens) - 1
        outs.append(
            GenerateOutput(
                request_id="r",
                token_ids=ids,
                prompt_info=PromptInfo(num_prompt_tokens=7) if step == 0 else None,
                logprobs=[LogprobRow(token_ids=[t], logprobs=[-0.5], rank=1) for t in ids]
                if pattern.logprobs
                else None,
                finish_reason=FinishReason.LENGTH if last else None,
                stop_reason=None,
                kv_transfer_params={"k": 1} if last else None,
            )
        )
    return outs


async def _yield(times: int) -> None:
    for _ in range(times):
        await asyncio.sleep(0)


async def _run(pattern: Pattern) -> tuple[list[GenerateOutput], list[GenerateOutput]]:
    channel = OutputChannel()
    put = _outputs(pattern)
    got: list[GenerateOutput] = []

    async def reader() -> None:
        i = 0
        async for out in channel:
            got.append(out)
            await _yield(pattern.read_yields[i % len(pattern.read_yields)])
            i += 1

    task = asyncio.get_running_loop().create_task(reader())
    for out, pause in zip(put, pattern.put_yields, strict=True):
        channel.put(out)
        await _yield(pause)
    await asyncio.wait_for(task, 5)
    return put, got


@settings(max_examples=200, deadline=None)
@given(patterns())
def test_coalescing_loses_and_reorders_nothing(pattern: Pattern) -> None:
    with asyncio.Runner() as runner:
        put, got = runner.run(_run(pattern))
    assert [t for o in got for t in o.token_ids] == [t for o in put for t in o.token_ids]
    if pattern.logprobs:
        assert [r for o in got for r in o.logprobs or []] == [r for o in put for r in o.logprobs or []]
    else:
        assert all(o.logprobs is None for o in got)
    finals = [o for o in got if o.finish_reason is not None]
    assert len(finals) == 1
    assert got[-1] is finals[0]
    assert finals[0].finish_reason == FinishReason.LENGTH
    assert finals[0].kv_transfer_params == {"k": 1}
    assert [o.kv_transfer_params is not None for o in got].count(True) == 1
    assert got[0].prompt_info == PromptInfo(num_prompt_tokens=7)
    assert all(o.prompt_info is None for o in got[1:])
    assert len(got) <= len(put)


@settings(max_examples=50, deadline=None)
@given(patterns())
def test_first_output_is_not_held_back_for_a_waiting_reader(pattern: Pattern) -> None:
    async def scenario() -> None:
        channel = OutputChannel()
        put = _outputs(pattern)
        got: list[GenerateOutput] = []

        async def reader() -> None:
            got.append(await channel.get())

        task = asyncio.get_running_loop().create_task(reader())
        await _yield(2)  # the reader now waits
        channel.put(put[0])
        await _yield(2)  # wake-up and hand-over, no timer involved
        assert got == [put[0]]
        await task

    with asyncio.Runner() as runner:
        runner.run(scenario())
