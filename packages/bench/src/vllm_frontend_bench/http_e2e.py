"""B3 HTTP end to end: this server over EngineCoreLlm vs vLLM's own OpenAI server, same model and engine.

Both servers get the same engine settings (`--dtype float32 --max-model-len 512 --disable-log-stats`,
eager, vLLM's defaults otherwise) and the same load: streaming chat completions with fixed `max_tokens`
and `ignore_eos`, at each concurrency level. Every server of the selected benchmarks runs for the whole
measurement, one busy at a time, the arms alternating load by load (an idle server costs little: each
idle engine's forward-pass process about 1.4 % of a CPU), so a machine that speeds up or slows down
during the run moves every arm alike. When B4 or B5 runs too, its worker is this benchmark's server
(started once), see `run_http`. B3e (`engine_alone`) adds the engine alone: the most any frontend could
get from this engine here.

Placement: the load generator (this process, while it measures) and the routers of B4 and B5 stand for
other hosts; they run on the CPUs the engine did not bind its OpenMP threads to
(`placement.spare_cpus`), so they do not preempt the forward pass, as they never could on a GPU. Our
frontend keeps itself off the engine's CPUs once its engine is ready (`vllm-frontend serve
--frontend-affinity auto`, the default; `vllm_server.affinity`). vLLM's server is measured in two arms
of one server, alternating: as deployed (its API server placed by the kernel) and placed like ours (its
API server process pinned to the CPUs its engine did not bind, the engine core left alone, as ours
leaves it), so B3 prints the frontend gain (ours / vLLM placed like ours, `B3p`) and the placement gain
(vLLM placed like ours / as deployed) apart. `HttpPlan.isolate=False` (the CLI's `--no-isolate`) runs
the load generator and the routers co-located instead.

CPU per output token (`B3c`): the CPU time (/proc) of the frontend process alone (our worker's main
process; vLLM's API server process; never the engine core below them) and of each router (its process
and any below it), over each load, per 1,000 output tokens the load generator counted.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vllm_frontend_bench.cpu import CpuMeter, CpuOf, per_1k_tokens
from vllm_frontend_bench.engine_alone import EngineAlone, start_engine_alone
from vllm_frontend_bench.http_figures import (
    CPU_LABEL,
    Measured,
    cpu_row,
    failure_target,
    load_rows,
    tokens_agree_target,
    tokens_per_chunk_note,
)
from vllm_frontend_bench.loadgen import Load, LoadStats, run_load
from vllm_frontend_bench.placement import engine_cpus, pinned_here, spare_cpus
from vllm_frontend_bench.report import BenchResult, Row, Target
from vllm_frontend_bench.router import router_result, start_router
from vllm_frontend_bench.stats import Summary
from vllm_frontend_bench.vllm_router import (
    RouterInstallError,
    ensure_vllm_router,
    not_run,
    router_cpu,
    start_vllm_router,
    vllm_router_result,
)
from vllm_frontend_testing.processes import ServerProcess, free_port, frontend_argv, start_server
from vllm_server.affinity import pin

logger = logging.getLogger(__name__)

MODEL_NAME = "tiny"
#: vLLM's engine flags, the same for both servers (each compiles by default: both run eager here).
ENGINE_FLAGS = ("--dtype", "float32", "--max-model-len", "512", "--disable-log-stats", "--enforce-eager")
VLLM_ONLY_FLAGS = ("--disable-uvicorn-access-log", "--uvicorn-log-level", "warning")
#: The levels whose targets count.
TARGET_LEVELS = (32, 128)
#: B3's targets (output tok/s at the target levels): ours over vLLM's server as deployed, and over
#: vLLM's server placed like ours (the frontend gain alone).
DEPLOYED_TARGET = 1.25
PLACED_TARGET = 1.1
#: B3c's targets: CPU per output token over vLLM's API server's, of our worker's frontend and our router.
WORKER_CPU_TARGET = 0.7
ROUTER_CPU_TARGET = 1.0


@dataclass(frozen=True, slots=True)
class HttpPlan:
    """What B3-B5 send: per level (concurrency) a number of requests, `max_tokens` each, `repeats` times."""

    #: Eight requests per connection at c=32 and c=128. Every request asks for the same `max_tokens`, so
    #: a closed loop runs in waves: the connections start together, finish together and send their next
    #: requests together. Two waves (c=128 x 256, as this plan once had) measure mostly those
    #: transitions (TTFT p50 136-203 ms, against 60-114 ms over eight waves, as the waves drift apart);
    #: eight waves measure the steady state, as `vllm bench serve`'s 1000 prompts do.
    levels: tuple[tuple[int, int], ...] = ((1, 8), (32, 256), (128, 1024))
    max_tokens: int = 64
    repeats: int = 3
    warmup_requests: int = 16
    #: `--stream-interval` of both servers (vLLM's flag; 1, its default, streams every token).
    stream_interval: int = 1
    #: Keep the load generator and the router off the engine's bound CPUs (see the module docstring).
    isolate: bool = True

    @property
    def engine_flags(self) -> tuple[str, ...]:
        """The engine flags both servers get."""
        interval = ("--stream-interval", str(self.stream_interval)) if self.stream_interval != 1 else ()
        return (*ENGINE_FLAGS, *interval)

    def loads(self) -> list[Load]:
        """One Load per level."""
        return [Load(c, n, self.max_tokens, MODEL_NAME) for c, n in self.levels]


QUICK_HTTP = HttpPlan(levels=((1, 2), (8, 16)), max_tokens=16, repeats=1, warmup_requests=4)


async def start_worker(
    model_dir: Path, log_dir: Path, engine_flags: Sequence[str]
) -> tuple[ServerProcess, int]:
    """`vllm-frontend serve --model` on free ports; returns it and its gRPC port."""
    port, grpc_port = free_port(), free_port()
    argv = frontend_argv(
        "serve", "--model", str(model_dir), "--served-model-name", MODEL_NAME, *engine_flags,
        "--host", "127.0.0.1", "--port", str(port), "--grpc-port", str(grpc_port), "--log-level", "warning",
    )  # fmt: skip
    server = await start_server(
        "worker", argv, http_port=port, ready_path="/ready", log_path=log_dir / "worker.log"
    )
    return server, grpc_port


async def start_vllm(model_dir: Path, log_dir: Path, engine_flags: Sequence[str]) -> ServerProcess:
    """vLLM's own OpenAI server (`python -m vllm.entrypoints.openai.api_server`) on a free port."""
    port = free_port()
    argv = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
        "--served-model-name", MODEL_NAME, *engine_flags, *VLLM_ONLY_FLAGS, "--host", "127.0.0.1",
        "--port", str(port),
    ]  # fmt: skip
    return await start_server(
        "vllm-serve", argv, http_port=port, ready_path="/health", log_path=log_dir / "vllm-serve.log"
    )


def placement(engine_server: ServerProcess, plan: HttpPlan) -> tuple[frozenset[int] | None, str]:
    """Where the load generator (and router) run beside `engine_server`: the CPUs, and those in words."""
    if not plan.isolate:
        return None, "co-located with the engine (--no-isolate)"
    bound = engine_cpus(engine_server)
    spare = spare_cpus(bound)
    if spare is None:
        return None, "co-located with the engine (it bound no CPUs of its own)"
    return spare, f"on CPUs {sorted(spare)}, off CPUs {sorted(bound)} (bound by the engine's threads)"


@dataclass(slots=True)
class Arm:
    """One thing measured under the load: how it takes a load, where the load generator runs beside it,
    the processes its CPU figure counts, and what to do before each of its loads (vLLM's two arms are
    one server, placed differently before each)."""

    label: str
    run: Callable[[Load], Awaitable[LoadStats]]
    cpus: frozenset[int] | None = None
    cpu: CpuOf | None = None
    before: Callable[[], None] | None = None
    log_tail: Callable[[], str] = lambda: ""


def server_arm(
    label: str,
    server: ServerProcess,
    cpus: frozenset[int] | None,
    cpu: CpuOf | None = None,
    before: Callable[[], None] | None = None,
) -> Arm:
    """An arm that takes the load over HTTP (`run_load`) from `server`."""
    return Arm(label, functools.partial(run_load, server.base_url), cpus, cpu, before, server.log_tail)


async def warm_up(arm: Arm, plan: HttpPlan) -> None:
    """A few requests first (compiles, caches, connection setup), checked to succeed."""
    stats = await arm.run(Load(4, plan.warmup_requests, plan.max_tokens, MODEL_NAME))
    if stats.failed:
        raise RuntimeError(f"{arm.label}: warm-up requests failed; its log ends:\n{arm.log_tail()}")


async def measure(arms: Sequence[Arm], plan: HttpPlan) -> list[Measured]:
    """Run every level on every arm, the arms alternating load by load, repeats interleaved; each load
    with the load generator (this process) on its arm's CPUs.

    The load generator's heap is frozen for the measurement, as our servers freeze theirs: this process
    holds vLLM and torch (B2's baseline codec, B3e's engine), about 600,000 objects that a full
    collection would walk for about 0.4 s in the middle of a load, stalling every connection.
    """
    measured: list[Measured] = [{} for _ in arms]
    was_frozen = gc.get_freeze_count() > 0
    gc.collect()
    gc.freeze()
    try:
        return await _measure(arms, plan, measured)
    finally:
        if not was_frozen:  # left as its host had it otherwise (`gc.unfreeze` thaws all)
            gc.unfreeze()


async def _measure(arms: Sequence[Arm], plan: HttpPlan, measured: list[Measured]) -> list[Measured]:
    for _ in range(plan.repeats):
        for load in plan.loads():
            for arm, into in zip(arms, measured, strict=True):
                if arm.before is not None:
                    arm.before()
                meter = CpuMeter(arm.cpu) if arm.cpu is not None else None
                with pinned_here(arm.cpus):
                    if meter is not None:
                        meter.start()
                    stats = await arm.run(load)
                    if meter is not None:
                        cpu = per_1k_tokens(meter.stop(), stats.output_tokens)
                        stats = dataclasses.replace(stats, cpu_s_per_1k_tokens=cpu)
                if stats.failed:
                    logger.warning(
                        "%s: %d of %d requests failed at c=%d (%s); its log ends:\n%s",
                        arm.label, stats.failed, load.num_requests, load.concurrency,
                        ", ".join(f"{n} {kind}" for kind, n in stats.failure_kinds), arm.log_tail(),
                    )  # fmt: skip
                into.setdefault(load.concurrency, []).append(stats)
    return measured


def _ratio(row: Row) -> str:
    return f"ratio {row.ratio:.2f}x"


def _target_levels(measured: Measured) -> list[int]:
    return [c for c in TARGET_LEVELS if c in measured] or sorted(measured)[-1:]


def http_result(ours: Measured, vllm: Measured, plan: HttpPlan, *, placed: bool = False) -> BenchResult:
    """B3 (vLLM's server as deployed) or, `placed`, B3p (vLLM's server placed like ours) and its targets."""
    key, must = ("B3p", PLACED_TARGET) if placed else ("B3", DEPLOYED_TARGET)
    where = "placed like ours (its API server pinned off the engine's CPUs)" if placed else "as deployed"
    short = "vllm serve placed like ours" if placed else "vllm serve as deployed"
    result = BenchResult(
        key=key,
        title=f"HTTP end to end vs vLLM's server {where}, streaming chat, max_tokens={plan.max_tokens}, "
        "ignore_eos",
        ours_label="vllm-frontend serve --model (Server over EngineCoreLlm)",
        baseline_label=f"python -m vllm.entrypoints.openai.api_server (vLLM 0.32 OpenAI server), {where}",
        rows=load_rows(ours, vllm, cpu="frontend"),
        notes=[
            f"levels (concurrency x requests): {list(plan.levels)}; {plan.repeats} repeats",
            f"engine flags of both servers: {' '.join(plan.engine_flags)}",
            tokens_per_chunk_note("ours", ours),
            tokens_per_chunk_note("vLLM", vllm),
            "frontend CPU: our server's main process, vLLM's API server process (not the engine cores)",
        ],
    )
    for c in _target_levels(ours):
        tok, ttft = result.row(f"c={c} output tok/s"), result.row(f"c={c} TTFT p50")
        result.targets += [
            Target(f"{key} c={c} output tok/s >= {must}x {short}", tok.ratio >= must, _ratio(tok)),
            Target(f"{key} c={c} TTFT p50 no worse than {short}", ttft.ratio <= 1.0, _ratio(ttft)),
        ]
    return result


def gain_notes(ours: Measured, placed: Measured, deployed: Measured) -> list[str]:
    """Per level, B3's lead split: the frontend gain (ours / vLLM placed like ours) and the placement
    gain (vLLM placed like ours / vLLM as deployed), of the medians of output tok/s."""

    def median(measured: Measured, c: int) -> float:
        return Summary.of([s.output_tokens_per_s for s in measured.get(c, [])]).median

    notes = []
    for c in sorted(ours):
        mine, fair, kernel = median(ours, c), median(placed, c), median(deployed, c)
        notes.append(
            f"c={c} output tok/s: frontend gain (ours / vLLM placed like ours) {mine / fair:.2f}x, "
            f"placement gain (vLLM placed like ours / as deployed) {fair / kernel:.2f}x, "
            f"together (ours / vLLM as deployed) {mine / kernel:.2f}x"
        )
    return notes


def cpu_result(worker: Measured, router: Measured | None, vllm: Measured, vllm_where: str) -> BenchResult:
    """B3c: CPU per output token of our worker's frontend and our router next to vLLM's API server's."""
    result = BenchResult(
        key="B3c",
        title="frontend CPU per output token over the load of B3 (CPU seconds per 1,000 output tokens)",
        ours_label="our worker's frontend process (B3) / our router's processes (B4)",
        baseline_label=f"vLLM's API server process ({vllm_where})",
        notes=[
            "CPU: /proc utime + stime over each load; the worker's and vLLM's main process only (their "
            "engine cores are not counted), the router's process and any below it; /proc counts in "
            "clock ticks (10 ms), so a short load's figure is coarse",
        ],
    )
    for c in sorted(worker):
        result.rows.append(cpu_row(f"c={c} worker frontend {CPU_LABEL}", worker[c], vllm.get(c, [])))
        if router is not None:
            result.rows.append(cpu_row(f"c={c} router {CPU_LABEL}", router.get(c, []), vllm.get(c, [])))
    if router is None:
        result.notes.append("router: not measured (run B4 with B3 for its figure)")
    for c in _target_levels(worker):
        row = result.row(f"c={c} worker frontend {CPU_LABEL}")
        result.targets.append(
            Target(
                f"B3c c={c} worker frontend CPU per output token <= {WORKER_CPU_TARGET}x vLLM's API server",
                row.ratio <= WORKER_CPU_TARGET,
                f"ratio {row.ratio:.2f}x",
            )
        )
        if router is not None:
            row = result.row(f"c={c} router {CPU_LABEL}")
            result.targets.append(
                Target(
                    f"B3c c={c} router CPU per output token <= {ROUTER_CPU_TARGET}x vLLM's API server",
                    row.ratio <= ROUTER_CPU_TARGET,
                    f"ratio {row.ratio:.2f}x (aim: 0.5x)",
                )
            )
    return result


def engine_alone_result(
    alone: Measured,
    ours: Measured,
    deployed: Measured,
    plan: HttpPlan,
    where: str,
    placed: Measured | None = None,
) -> BenchResult:
    """B3e: our worker and vLLM's server as deployed (and `placed` like ours, when measured) next to the
    engine alone (`engine_alone`), the most output tok/s any frontend could get from this engine on this
    machine under B3's load."""
    result = BenchResult(
        key="B3e",
        title="the engine alone: the most output tok/s a frontend could get from this engine here, B3's load",
        ours_label="our worker (B3) and vLLM's server as deployed (B3) and placed like ours (B3p), each row "
        "says which",
        baseline_label="the engine alone: an EngineCoreLlm with the worker's settings driven in the load "
        "generator's process, no HTTP, no detokenizer",
        notes=[
            "each request: the load generator's chat request rendered and lowered by our chat and text "
            "layers (the engine request our worker sends); TTFT and ITL between the engine's outputs",
            f"the engine alone's driver: {where}",
        ],
    )
    arms = [("worker", ours), ("vLLM as deployed", deployed)]
    if placed is not None:
        arms.append(("vLLM placed like ours", placed))
    for c in sorted(ours):
        for label, measured in arms:
            for attr, name in (("output_tokens_per_s", "output tok/s"), ("ttft_p50_ms", "TTFT p50")):
                result.rows.append(
                    Row(
                        f"c={c} {label} {name}",
                        "tok/s" if attr == "output_tokens_per_s" else "ms",
                        Summary.of([getattr(s, attr) for s in measured[c]]),
                        Summary.of([getattr(s, attr) for s in alone.get(c, [])]),
                        better="higher" if attr == "output_tokens_per_s" else "lower",
                    )
                )
    for c in _target_levels(ours):
        ceiling = 1 / result.row(f"c={c} vLLM as deployed output tok/s").ratio
        placed_ceiling = ""
        if placed is not None:
            placed_ceiling = (
                f", and {1 / result.row(f'c={c} vLLM placed like ours output tok/s').ratio:.2f}x vLLM's "
                f"server placed like ours, the most B3p could read (its target: {PLACED_TARGET}x)"
            )
        result.notes.append(
            f"c={c}: the engine alone ran {ceiling:.2f}x vLLM's server as deployed, the most B3 could read "
            f"here (its target: {DEPLOYED_TARGET}x){placed_ceiling}; our worker ran "
            f"{result.row(f'c={c} worker output tok/s').ratio:.2f}x the engine alone"
        )
    result.targets += [
        tokens_agree_target("B3e", plan.max_tokens, {"engine alone": alone, "worker": ours}),
        failure_target("B3e", {"engine alone": alone}),
    ]
    return result


def _deployed_and_placed(vllm: ServerProcess, cpus: frozenset[int] | None) -> tuple[Arm, Arm | None, str]:
    """vLLM's two arms: its API server where the kernel put it, and pinned off its engine's CPUs as
    ours pins itself (None when the engine bound no CPUs of its own); the placed arm in words. The load
    generator runs on `cpus` beside both."""
    deployed = frozenset(os.sched_getaffinity(vllm.pid))
    bound = engine_cpus(vllm)
    spare = spare_cpus(bound)
    as_deployed = server_arm(
        "vLLM as deployed", vllm, cpus, CpuOf(vllm.pid), before=lambda: pin(vllm.pid, deployed)
    )
    if spare is None:
        return as_deployed, None, "its engine bound no CPUs of its own: no placed arm"
    placed = server_arm(
        "vLLM placed like ours", vllm, cpus, CpuOf(vllm.pid), before=lambda: pin(vllm.pid, spare)
    )
    return as_deployed, placed, f"API server on CPUs {sorted(spare)}, off CPUs {sorted(bound)}"


async def run_http(
    model_dir: Path, plan: HttpPlan, log_dir: Path, *, b3: bool, b4: bool, b5: bool = False
) -> list[BenchResult]:
    """Run B3, B4 and/or B5 (B3 with B3p, B3c and B3e). Every server of the selected benchmarks runs for
    the whole measurement (one is busy at a time: the others idle) and the arms alternate load by load,
    so a machine that speeds up or slows down during the run moves every arm alike: the worker alone,
    the routers in front of it (B4, B5), vLLM's server in its two placements and the engine alone (B3)."""
    results: list[BenchResult] = []
    vllm_router: Path | None = None
    if b5:
        try:
            vllm_router = await ensure_vllm_router()  # before any server: it may take a while
        except RouterInstallError as exc:
            results.append(not_run("B5", str(exc)))
            b5 = False
    alone: EngineAlone | None = None
    servers: list[ServerProcess] = []  # stopped last to first
    try:
        if b3:  # first, while this process may still run on every CPU (its engine inherits that)
            alone = await start_engine_alone(model_dir, MODEL_NAME, plan.engine_flags)
        worker, grpc_port = await start_worker(model_dir, log_dir, plan.engine_flags)
        servers.append(worker)
        cpus, ours_placement = placement(worker, plan)
        arms = [server_arm("worker alone", worker, cpus, CpuOf(worker.pid))]
        if b4 or b5:
            servers.append(await start_router(grpc_port, log_dir))
            arms.append(server_arm("our router", servers[-1], cpus, router_cpu(servers[-1])))
        if vllm_router is not None:
            try:
                servers.append(await start_vllm_router(vllm_router, grpc_port, model_dir, log_dir))
                arms.append(server_arm("vllm-router", servers[-1], cpus, router_cpu(servers[-1])))
            except RuntimeError as exc:  # it exited or never answered: its log is in the message
                results.append(not_run("B5", f"vllm-router did not start: {exc}"))
                b5 = False
        for router in servers[1:]:
            if cpus is not None:
                for pid in router_cpu(router).pids():
                    pin(pid, cpus)
        placed: Arm | None = None
        if b3:
            vllm = await start_vllm(model_dir, log_dir, plan.engine_flags)
            servers.append(vllm)
            vllm_cpus, vllm_placement = placement(vllm, plan)
            as_deployed, placed, placed_where = _deployed_and_placed(vllm, vllm_cpus)
            arms += [as_deployed, *([placed] if placed is not None else [])]
            assert alone is not None
            arms.append(Arm("engine alone", alone.run, cpus))
        for arm in arms:
            await warm_up(arm, plan)
        measured = dict(zip([a.label for a in arms], await measure(arms, plan), strict=True))
    finally:
        for server in reversed(servers):
            await server.stop()
        if alone is not None:
            await alone.stop()
    ours = measured["worker alone"]
    if b3:
        deployed = measured["vLLM as deployed"]
        placed_measured = measured.get("vLLM placed like ours")  # None when there is no placed arm
        b3_result = http_result(ours, deployed, plan)
        b3_result.notes += [
            f"load generator beside ours: {ours_placement}",
            f"load generator beside vLLM: {vllm_placement}",
            f"vLLM placed like ours (B3p): {placed_where}",
            "every server ran for the whole measurement, the arms alternating load by load",
        ]
        vllm_arms_measured = {"ours": ours, "vLLM as deployed": deployed}
        if placed_measured is not None:
            vllm_arms_measured["vLLM placed like ours"] = placed_measured
        b3_result.targets.append(failure_target("B3", vllm_arms_measured))
        results.append(b3_result)
        if placed_measured is not None:
            fair = http_result(ours, placed_measured, plan, placed=True)
            fair.notes += [
                f"vLLM placed like ours: {placed_where}",
                *gain_notes(ours, placed_measured, deployed),
            ]
            results.append(fair)
        results.append(
            cpu_result(
                ours,
                measured.get("our router"),
                placed_measured if placed_measured is not None else deployed,
                "placed like ours" if placed_measured is not None else "as deployed",
            )
        )
        results.append(
            engine_alone_result(
                measured["engine alone"], ours, deployed, plan, ours_placement, placed_measured
            )
        )
    if b4:
        b4_result = router_result(measured["our router"], ours, plan.repeats)
        b4_result.notes += [
            f"engine flags of the worker: {' '.join(plan.engine_flags)}",
            f"router and load generator: {ours_placement}",
        ]
        b4_result.targets.append(
            failure_target("B4", {"worker alone": ours, "router": measured["our router"]})
        )
        results.append(b4_result)
    if b5:
        b5_result = vllm_router_result(measured["our router"], measured["vllm-router"], ours, plan.max_tokens)
        b5_result.notes += [
            f"engine flags of the worker: {' '.join(plan.engine_flags)}",
            f"routers and load generator: {ours_placement}",
            f"{plan.repeats} repeats, the three arms alternating",
        ]
        results.append(b5_result)
    return results
