"""The stream interval (`StreamPacer`): batching loses, reorders and delays nothing it must not.

The contract suite checks the interval through every Llm (`test_stream_interval_batches_outputs...`);
here: the pacer's properties over random step patterns, the Llm-level interval and its per-request
raise, and an abort that delivers the tokens the interval held (MockLlm and the real engine core).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.llm.harness import collect
from vllm_llm import EngineCoreLlm, GenerateStream, MockLlm
from vllm_llm._pacing import StreamPacer, effective_interval
from vllm_llm.engine_core._outputs import RequestState
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest, LogprobRow, SamplingParams

PROMPT = [5, 17, 42, 99, 7]


def _output(first: int, n: int, *, final: bool) -> GenerateOutput:
    ids = list(range(first, first + n))
    return GenerateOutput(
        request_id="r",
        token_ids=ids,
        logprobs=[LogprobRow(token_ids=[t], logprobs=[-1.0], rank=1) for t in ids],
        finish_reason=FinishReason.LENGTH if final else None,
    )


@given(
    interval=st.integers(1, 9),
    steps=st.lists(st.integers(0, 4), min_size=1, max_size=40),
    abort_at=st.none() | st.integers(0, 39),
)
def test_pacer_keeps_every_token_in_order_and_batches_the_middle(
    interval: int, steps: list[int], abort_at: int | None
) -> None:
    pacer = StreamPacer(interval)
    sent: list[GenerateOutput] = []
    produced: list[int] = []
    aborted = abort_at is not None and abort_at < len(steps)
    for i, n in enumerate(steps):
        if aborted and i == abort_at:
            held = pacer.flush()
            sent += [held] if held is not None else []
            break
        out = _output(len(produced), n, final=i == len(steps) - 1)
        produced += out.token_ids
        paced = pacer.pace(out)
        if paced is not None:
            sent.append(paced)
    assert [t for o in sent for t in o.token_ids] == produced
    assert [r.token_ids[0] for o in sent for r in o.logprobs or ()] == produced
    if not aborted:
        assert sent[-1].finish_reason == FinishReason.LENGTH
    assert all(o.finish_reason is None for o in sent[:-1])
    # The first output goes out as it came; later ones only with `interval` tokens, or the final.
    if steps[0] and not (aborted and abort_at == 0):
        assert sent[0].token_ids == list(range(steps[0]))
    if interval > 1:  # 1 passes every output through as it came
        for o in sent[1:]:
            assert len(o.token_ids) >= interval or o is sent[-1]


def test_the_llm_interval_is_a_floor() -> None:
    assert effective_interval(None, 3) == 3
    assert effective_interval(2, 3) == 3
    assert effective_interval(5, 3) == 5
    assert effective_interval(1, 1) == 1


def _request(request_id: str, *, max_tokens: int, stream_interval: int | None = None) -> GenerateRequest:
    return GenerateRequest(
        request_id=request_id,
        prompt_token_ids=PROMPT,
        sampling_params=SamplingParams(
            temperature=0.0, max_tokens=max_tokens, ignore_eos=True, stream_interval=stream_interval
        ),
    )


@pytest.mark.parametrize(("llm_interval", "requested", "floor"), [(3, None, 3), (3, 2, 3), (3, 5, 5)])
async def test_mock_llm_interval_raised_per_request(
    llm_interval: int, requested: int | None, floor: int
) -> None:
    llm = MockLlm(stream_interval=llm_interval, coalesce=False)
    got = await collect(await llm.generate(_request("m", max_tokens=12, stream_interval=requested)))
    sizes = [len(o.token_ids) for o in got.outputs]
    assert sum(sizes) == 12
    assert sizes[0] == 1
    assert all(n >= floor for n in sizes[1:-1]), sizes
    assert len(sizes) <= 2 + 11 // floor, sizes


async def test_a_bad_stream_interval_is_refused() -> None:
    from vllm_llm import InvalidRequest

    with pytest.raises(InvalidRequest, match="stream_interval"):
        await MockLlm().generate(_request("bad", max_tokens=3, stream_interval=0))


class _Signalling(StreamPacer):
    """A pacer that says when it holds at least `n` tokens."""

    __slots__ = ("holding", "n")

    def __init__(self, interval: int, n: int) -> None:
        super().__init__(interval)
        self.n = n
        self.holding = asyncio.Event()

    def pace(self, out: GenerateOutput) -> GenerateOutput | None:
        paced = super().pace(out)
        held = self._held
        if held is not None and len(held.token_ids) >= self.n:
            self.holding.set()
        return paced


def _signal_when_holding(pacer: StreamPacer, n: int) -> _Signalling:
    """A `_Signalling` pacer taking over `pacer`'s state."""
    signalling = _Signalling(pacer.interval, n)
    signalling._sent_first = pacer._sent_first
    signalling._held = pacer._held
    return signalling


async def _abort_while_holding(llm: MockLlm | EngineCoreLlm, install: Callable[[int], _Signalling]) -> None:
    """Abort a request once the interval holds 3 tokens: everything generated is delivered, in order."""
    every = await collect(await llm.generate(_request("all", max_tokens=40)))
    stream: GenerateStream = await llm.generate(_request("held", max_tokens=40, stream_interval=1000))
    signalling = install(3)
    first = await stream.__anext__()
    await asyncio.wait_for(signalling.holding.wait(), 60)
    await llm.abort(["held"])
    rest = [o async for o in stream]
    assert rest[-1].finish_reason == FinishReason.ABORT
    delivered = first.token_ids + [t for o in rest for t in o.token_ids]
    assert len(delivered) >= 4
    assert delivered == every.token_ids[: len(delivered)]


async def test_mock_abort_delivers_what_the_interval_held() -> None:
    llm = MockLlm(coalesce=False)

    def install(n: int) -> _Signalling:
        (running,) = llm._running.values()
        signalling = running.pacer = _signal_when_holding(running.pacer, n)
        return signalling

    await _abort_while_holding(llm, install)


async def test_engine_core_abort_delivers_what_the_interval_held(engine_llm: EngineCoreLlm) -> None:
    def install(n: int) -> _Signalling:
        (state,) = [s for s, _ in engine_llm._requests.values() if s.external_id == "held"]
        assert isinstance(state, RequestState)
        signalling = state.pacer = _signal_when_holding(state.pacer, n)
        return signalling

    await _abort_while_holding(engine_llm, install)
