"""B1 remote hop: MockLlm in process vs RemoteLlm -> GrpcFrontend -> MockLlm in another process.

The engine (MockLlm) emits one token per stream per step, either at 100 steps/s (S concurrent streams)
or flat out. Ours is the remote path; the baseline the same MockLlm read in process. Figures:
- delivered tokens/s: paced, the tokens that arrived while every stream was running (from the last
  stream's first message to the first stream's last message) over that window, so the start-up skew
  of the requests does not count; flat out, all tokens over the wall time;
- inter-token latency (ITL): the gaps between consecutive messages of a stream, p50 and p99 over all
  streams; the "added" figure is ours minus the baseline's;
- tokens per message: how much the path coalesced;
- CPU per token: of the client process (the bench process, gRPC threads included) and of the server
  process (from /proc); for the baseline, of the one process doing both.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from vllm_frontend_bench.report import BenchResult, Row, Target
from vllm_frontend_bench.stats import Summary, percentile
from vllm_llm import Llm, MockLlm
from vllm_llm.wire import GenerateRequest, SamplingParams

STEPS_PER_S = 100


@dataclass(frozen=True, slots=True)
class HopScenario:
    """S streams of `tokens` tokens each; `paced`: 100 steps/s, else flat out."""

    streams: int
    tokens: int
    paced: bool = True

    @property
    def label(self) -> str:
        """`S=256 @100 steps/s` or `S=256 flat out`."""
        return f"S={self.streams} " + (f"@{STEPS_PER_S} steps/s" if self.paced else "flat out")


@dataclass(frozen=True, slots=True)
class HopPlan:
    """The scenarios of B1 and how often each runs."""

    scenarios: tuple[HopScenario, ...] = (
        HopScenario(1, 300),
        HopScenario(64, 300),
        HopScenario(256, 300),
        HopScenario(256, 1000, paced=False),
    )
    repeats: int = 3


QUICK_HOP = HopPlan(
    scenarios=(HopScenario(1, 30), HopScenario(16, 30), HopScenario(16, 100, paced=False)), repeats=1
)


@dataclass(slots=True)
class _Trace:
    """The messages one stream delivered: arrival times and token counts."""

    start: float
    times: list[float] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class HopStats:
    """The figures of one run of one scenario."""

    tokens_per_s: float
    itl_p50_ms: float
    itl_p99_ms: float
    ttft_p50_ms: float
    tokens_per_message: float
    client_cpu_us_per_token: float
    server_cpu_us_per_token: float


def hop_request(i: int, tokens: int) -> GenerateRequest:
    """Request `i` of a scenario: `tokens` tokens exactly."""
    return GenerateRequest(
        request_id=f"hop-{i}",
        prompt_token_ids=[1 + i % 1000, 2, 3, 4],
        sampling_params=SamplingParams(max_tokens=tokens, ignore_eos=True),
    )


async def _consume(llm: Llm, request: GenerateRequest) -> _Trace:
    trace = _Trace(start=time.perf_counter())
    stream = await llm.generate(request)
    async for out in stream:
        trace.times.append(time.perf_counter())
        trace.tokens.append(len(out.token_ids))
    return trace


async def run_streams(llm: Llm, scenario: HopScenario, server_pid: int | None = None) -> HopStats:
    """Run one scenario against `llm` and measure it (and the CPU of `server_pid`, if given)."""
    cpu, server_cpu = time.process_time(), _process_cpu(server_pid)
    start = time.perf_counter()
    traces = await asyncio.gather(
        *(_consume(llm, hop_request(i, scenario.tokens)) for i in range(scenario.streams))
    )
    wall = time.perf_counter() - start
    cpu, server_cpu = time.process_time() - cpu, _process_cpu(server_pid) - server_cpu
    return _stats(traces, wall, paced=scenario.paced, cpu=(cpu, server_cpu))


def _process_cpu(pid: int | None) -> float:
    """User + system CPU seconds of process `pid` so far (0 without one)."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _window_rate(traces: Sequence[_Trace]) -> float:
    """Tokens per second while every stream was running."""
    begin = max(t.times[0] for t in traces)
    end = min(t.times[-1] for t in traces)
    if end - begin < 0.1:  # too short a common window: each stream's own rate, summed
        return sum(
            (sum(t.tokens) - t.tokens[0]) / (t.times[-1] - t.times[0]) for t in traces if len(t.times) > 1
        )
    tokens = sum(n for t in traces for at, n in zip(t.times, t.tokens, strict=True) if begin < at <= end)
    return tokens / (end - begin)


def _stats(traces: Sequence[_Trace], wall: float, *, paced: bool, cpu: tuple[float, float]) -> HopStats:
    total = sum(sum(t.tokens) for t in traces)
    gaps = [(b - a) * 1000 for t in traces for a, b in itertools.pairwise(t.times)]
    return HopStats(
        tokens_per_s=_window_rate(traces) if paced else total / wall,
        itl_p50_ms=percentile(gaps, 50),
        itl_p99_ms=percentile(gaps, 99),
        ttft_p50_ms=percentile([(t.times[0] - t.start) * 1000 for t in traces if t.times], 50),
        tokens_per_message=total / max(1, sum(len(t.times) for t in traces)),
        client_cpu_us_per_token=cpu[0] / total * 1e6,
        server_cpu_us_per_token=cpu[1] / total * 1e6,
    )


@contextlib.asynccontextmanager
async def hop_worker(step_interval: float) -> AsyncIterator[tuple[str, int]]:
    """A `hop_worker` process; yields its gRPC target and pid."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "vllm_frontend_bench.hop_worker", "--step-interval", str(step_interval),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        if not line.startswith(b"PORT "):
            raise RuntimeError(f"the hop worker did not start: {line!r}")
        yield f"127.0.0.1:{int(line.split()[1])}", process.pid
    finally:
        if process.stdin is not None:
            process.stdin.close()  # it stops when its stdin closes
        try:
            await asyncio.wait_for(process.wait(), 10)
        except TimeoutError:
            process.kill()
            await process.wait()


async def _remote(target: str) -> Llm:
    from vllm_remote_llm import RemoteLlm

    return await RemoteLlm.connect(target)


async def measure_hop(plan: HopPlan) -> dict[HopScenario, tuple[list[HopStats], list[HopStats]]]:
    """Per scenario: (remote runs, in-process runs), repeats interleaved."""
    out: dict[HopScenario, tuple[list[HopStats], list[HopStats]]] = {s: ([], []) for s in plan.scenarios}
    for paced in (True, False):
        scenarios = [s for s in plan.scenarios if s.paced == paced]
        if not scenarios:
            continue
        interval = 1 / STEPS_PER_S if paced else 0.0
        async with hop_worker(interval) as (target, pid):
            remote = await _remote(target)
            try:
                await run_streams(remote, HopScenario(8, 20, paced))  # warm up the channel
                for _ in range(plan.repeats):
                    for scenario in scenarios:
                        out[scenario][0].append(await run_streams(remote, scenario, pid))
                        local = MockLlm(step_interval=interval)
                        try:
                            out[scenario][1].append(await run_streams(local, scenario))
                        finally:
                            await local.shutdown()
            finally:
                await remote.shutdown()
    return out


def hop_result(
    measured: dict[HopScenario, tuple[list[HopStats], list[HopStats]]], repeats: int
) -> BenchResult:
    """The B1 result and its targets."""
    result = BenchResult(
        key="B1",
        title="remote hop: one token per stream per step",
        ours_label="RemoteLlm -> gRPC -> GrpcFrontend -> MockLlm (server in another process)",
        baseline_label="the same MockLlm read in process",
        notes=[
            f"{repeats} repeats; ITL = gap between consecutive messages of a stream",
            "client CPU/token: the bench process (gRPC threads included); its baseline is the one"
            " in-process MockLlm + readers; server CPU/token: the hop_worker process",
        ],
    )
    for scenario, (remote, local) in measured.items():
        label = scenario.label
        for attr, name, unit, better in (
            ("tokens_per_s", "delivered tok/s", "tok/s", "higher"),
            ("itl_p50_ms", "ITL p50", "ms", "lower"),
            ("itl_p99_ms", "ITL p99", "ms", "lower"),
            ("ttft_p50_ms", "first output p50", "ms", "lower"),
            ("tokens_per_message", "tokens/message", "tok", "higher"),
            ("client_cpu_us_per_token", "client CPU/token", "us", "lower"),
        ):
            ours = Summary.of([getattr(s, attr) for s in remote])
            base = Summary.of([getattr(s, attr) for s in local])
            result.rows.append(Row(f"{label} {name}", unit, ours, base, better=better))  # type: ignore[arg-type]
        server = Summary.of([s.server_cpu_us_per_token for s in remote])
        result.rows.append(Row(f"{label} server CPU/token", "us", server, None, better="lower"))
        if scenario.paced:
            added = [r.itl_p99_ms - b.itl_p99_ms for r, b in zip(remote, local, strict=True)]
            result.rows.append(Row(f"{label} added ITL p99", "ms", Summary.of(added), None, better="lower"))
            added50 = [r.itl_p50_ms - b.itl_p50_ms for r, b in zip(remote, local, strict=True)]
            result.rows.append(Row(f"{label} added ITL p50", "ms", Summary.of(added50), None, better="lower"))
    _hop_targets(result, measured)
    return result


def _hop_targets(
    result: BenchResult, measured: dict[HopScenario, tuple[list[HopStats], list[HopStats]]]
) -> None:
    paced = [s for s in measured if s.paced]
    if paced:
        big = max(paced, key=lambda s: s.streams)
        offered = big.streams * STEPS_PER_S
        delivered = result.row(f"{big.label} delivered tok/s").ours.median
        added = result.row(f"{big.label} added ITL p99").ours.median
        result.targets.append(
            Target(
                f"B1 {big.label}: delivered >= 99% of offered {offered:,} tok/s",
                delivered >= 0.99 * offered,
                f"{delivered:,.0f} tok/s = {delivered / offered:.1%}",
            )
        )
        result.targets.append(
            Target(f"B1 {big.label}: added p99 ITL <= 20 ms", added <= 20.0, f"{added:.1f} ms")
        )
    for scenario in (s for s in measured if not s.paced):
        rate = result.row(f"{scenario.label} delivered tok/s").ours.median
        result.targets.append(
            Target(
                f"B1 {scenario.label}: >= 150,000 tok/s through the hop",
                rate >= 150_000,
                f"{rate:,.0f} tok/s",
            )
        )
