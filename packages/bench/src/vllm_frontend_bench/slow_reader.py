"""B1r slow reader: where messages pile up when the reader behind RemoteLlm falls behind, and a fix.

A router's reader does real work per output (detokenize, render an SSE chunk, write to HTTP). When it
falls behind, the messages wait in the client's gRPC receive buffers: HTTP/2 flow control lets the
server send up to the stream window (64 KiB and growing with BDP probing, i.e. about a thousand
one-token messages per stream) before its writes stall, so the server's OutputChannel never sees
back-pressure and never coalesces, and each message still costs a read plus the reader's work.

Ours is a RemoteLlm over a channel with a small receive window (`grpc.http2.lookahead_bytes` 1 KiB,
BDP probing off): the server's writes stall after a few messages and its OutputChannel merges what
accumulates. The baseline is `RemoteLlm.connect`'s channel. Both read one worker (MockLlm at 100
steps/s in another process) with a reader that burns `work_us` of CPU per output.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from dataclasses import dataclass
from typing import Any

from vllm_frontend_bench.hop import STEPS_PER_S, hop_request, hop_worker
from vllm_frontend_bench.report import BenchResult, Row, Target
from vllm_frontend_bench.stats import Summary, percentile
from vllm_llm import Llm

#: The channel options of the proposed RemoteLlm change.
SMALL_WINDOW: tuple[tuple[str, Any], ...] = (
    ("grpc.http2.lookahead_bytes", 1024),
    ("grpc.http2.bdp_probe", 0),
)


@dataclass(frozen=True, slots=True)
class SlowReaderPlan:
    """S streams of `tokens` tokens at 100 steps/s, a reader burning `work_us` per output."""

    streams: int = 256
    tokens: int = 300
    work_us: float = 60.0
    repeats: int = 3


QUICK_SLOW_READER = SlowReaderPlan(streams=16, tokens=30, repeats=1)


@dataclass(frozen=True, slots=True)
class _Run:
    tokens_per_s: float
    itl_p99_ms: float
    lag_p99_ms: float
    tokens_per_output: float


def _burn(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


async def _read(llm: Llm, i: int, plan: SlowReaderPlan) -> tuple[list[float], list[int]]:
    times: list[float] = []
    counts: list[int] = []
    stream = await llm.generate(hop_request(i, plan.tokens))
    async for out in stream:
        _burn(plan.work_us)
        times.append(time.perf_counter())
        counts.append(len(out.token_ids))
    return times, counts


async def _run(llm: Llm, plan: SlowReaderPlan) -> _Run:
    start = time.perf_counter()
    traces = await asyncio.gather(*(_read(llm, i, plan) for i in range(plan.streams)))
    wall = time.perf_counter() - start
    total = sum(sum(c) for _, c in traces)
    gaps = [(b - a) * 1000 for t, _ in traces for a, b in itertools.pairwise(t)]
    own_pace = (plan.tokens - 1) / STEPS_PER_S
    return _Run(
        tokens_per_s=total / wall,
        itl_p99_ms=percentile(gaps, 99),
        lag_p99_ms=percentile([(t[-1] - t[0] - own_pace) * 1000 for t, _ in traces], 99),
        tokens_per_output=total / max(1, sum(len(c) for _, c in traces)),
    )


async def _small_window_remote(target: str) -> Llm:
    """A RemoteLlm like `connect` makes, over a channel with a small receive window."""
    import grpc

    from vllm_llm.wire import INFO, InfoRequest, LlmInfo, decode, encode
    from vllm_remote_llm import RemoteLlm
    from vllm_remote_llm._channel import service_config

    options = [
        ("grpc.service_config", service_config()),
        ("grpc.service_config_disable_resolution", 1),
        ("grpc.enable_retries", 1),
        *SMALL_WINDOW,
    ]
    channel = grpc.aio.insecure_channel(target, options=options)
    info_call = channel.unary_unary(INFO.path, request_serializer=encode, response_deserializer=None)
    raw = await info_call(InfoRequest(), wait_for_ready=True, timeout=30)
    return RemoteLlm(channel, decode(raw, LlmInfo), metadata=(), timeout=None)


async def run_slow_reader(plan: SlowReaderPlan) -> BenchResult:
    """Run B1r: repeats alternate between the two channels to one worker."""
    from vllm_remote_llm import RemoteLlm

    small: list[_Run] = []
    default: list[_Run] = []
    async with hop_worker(1 / STEPS_PER_S) as (target, _pid):
        ours = await _small_window_remote(target)
        base = await RemoteLlm.connect(target)
        try:
            for _ in range(plan.repeats):
                small.append(await _run(ours, plan))
                default.append(await _run(base, plan))
        finally:
            await ours.shutdown()
            await base.shutdown()
    return _result(plan, small, default)


def _result(plan: SlowReaderPlan, small: list[_Run], default: list[_Run]) -> BenchResult:
    label = f"S={plan.streams} @{STEPS_PER_S} steps/s, reader {plan.work_us:.0f} us/output"
    result = BenchResult(
        key="B1r",
        title="slow reader behind the hop: a small HTTP/2 receive window lets the server coalesce",
        ours_label="RemoteLlm over a channel with grpc.http2.lookahead_bytes=1024, grpc.http2.bdp_probe=0",
        baseline_label="RemoteLlm.connect (default window, BDP probing on)",
        notes=[
            f"{plan.repeats} repeats; offered {plan.streams * STEPS_PER_S:,} tok/s; delivered = tokens / wall"
            " time; stream lag = a stream's first-to-last output time beyond the engine's own pace"
        ],
    )
    for attr, name, unit, better in (
        ("tokens_per_s", "delivered tok/s", "tok/s", "higher"),
        ("itl_p99_ms", "ITL p99", "ms", "lower"),
        ("lag_p99_ms", "stream lag p99", "ms", "lower"),
        ("tokens_per_output", "tokens/message", "tok", "higher"),
    ):
        ours = Summary.of([getattr(r, attr) for r in small])
        base = Summary.of([getattr(r, attr) for r in default])
        result.rows.append(Row(f"{label} {name}", unit, ours, base, better=better))  # type: ignore[arg-type]
    row = result.row(f"{label} stream lag p99")
    result.targets.append(
        Target(
            "B1r (informative) small window keeps a slow reader's lag lower",
            row.ratio < 1.0,
            f"ratio {row.ratio:.2f}x",
        )
    )
    return result
