"""B3 HTTP end to end: this server over EngineCoreLlm vs vLLM's own OpenAI server, same model and engine.

The two servers run one after the other (never together: 2 cores). Both get the same engine settings
(`--dtype float32 --max-model-len 512 --disable-log-stats`, eager, vLLM's defaults otherwise) and the same
load: streaming chat completions with fixed `max_tokens` and `ignore_eos`, at each concurrency level.
When B4 runs too, its worker is this benchmark's server (started once), see `run_http`.

Placement: the load generator (this process, while it measures) and B4's router stand for other hosts;
they run on the CPUs the engine did not bind its OpenMP threads to (`placement.spare_cpus`), so they do
not preempt the forward pass, as they never could on a GPU. Each server's own processes are left as
they place themselves: our frontend keeps off the engine's CPUs once its engine is ready
(`vllm-frontend serve --frontend-affinity auto`, the default; `vllm_server.affinity`), vLLM's API
server and both engine cores are placed by the kernel. `HttpPlan.isolate=False` (the CLI's
`--no-isolate`) runs the load generator and the router co-located instead.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vllm_frontend_bench.http_figures import Measured, load_rows, tokens_per_chunk_note
from vllm_frontend_bench.loadgen import Load, run_load
from vllm_frontend_bench.placement import engine_cpus, pinned_here, spare_cpus
from vllm_frontend_bench.report import BenchResult, Target
from vllm_frontend_bench.router import router_result, start_router
from vllm_frontend_testing.processes import ServerProcess, free_port, frontend_argv, start_server
from vllm_server.affinity import pin

MODEL_NAME = "tiny"
ENGINE_FLAGS = ("--dtype", "float32", "--max-model-len", "512", "--disable-log-stats")
#: `vllm-frontend serve --model` always runs the engine eager (EngineCoreConfig.enforce_eager defaults to
#: True and has no flag); vLLM's server compiles by default, so it is told to run eager too.
VLLM_ONLY_FLAGS = ("--enforce-eager", "--disable-uvicorn-access-log", "--uvicorn-log-level", "warning")


@dataclass(frozen=True, slots=True)
class HttpPlan:
    """What B3/B4 send: per level (concurrency) a number of requests, `max_tokens` each, `repeats` times."""

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


async def warm_up(server: ServerProcess, plan: HttpPlan) -> None:
    """A few requests first (compiles, caches, connection setup), checked to succeed."""
    stats = await run_load(server.base_url, Load(4, plan.warmup_requests, plan.max_tokens, MODEL_NAME))
    if stats.failed:
        raise RuntimeError(f"{server.name}: warm-up requests failed; its log ends:\n{server.log_tail()}")


def placement(engine_server: ServerProcess, plan: HttpPlan) -> tuple[frozenset[int] | None, str]:
    """Where the load generator (and router) run beside `engine_server`: the CPUs, and those in words."""
    if not plan.isolate:
        return None, "co-located with the engine (--no-isolate)"
    bound = engine_cpus(engine_server)
    spare = spare_cpus(bound)
    if spare is None:
        return None, "co-located with the engine (it bound no CPUs of its own)"
    return spare, f"on CPUs {sorted(spare)}, off CPUs {sorted(bound)} (bound by the engine's threads)"


async def measure(
    servers: Sequence[ServerProcess], plan: HttpPlan, cpus: frozenset[int] | None
) -> list[Measured]:
    """Run every level on every server, repeats interleaved; the load generator runs on `cpus`."""
    with pinned_here(cpus):
        return await _measure(servers, plan)


async def _measure(servers: Sequence[ServerProcess], plan: HttpPlan) -> list[Measured]:
    measured: list[Measured] = [{} for _ in servers]
    for _ in range(plan.repeats):
        for load in plan.loads():
            for server, into in zip(servers, measured, strict=True):
                stats = await run_load(server.base_url, load)
                if stats.failed:
                    raise RuntimeError(f"{server.name}: {stats.failed} requests failed:\n{server.log_tail()}")
                into.setdefault(load.concurrency, []).append(stats)
    return measured


def http_result(ours: Measured, vllm: Measured, plan: HttpPlan) -> BenchResult:
    """The B3 result and its targets."""
    result = BenchResult(
        key="B3",
        title=f"HTTP end to end, streaming chat, max_tokens={plan.max_tokens}, ignore_eos",
        ours_label="vllm-frontend serve --model (Server over EngineCoreLlm)",
        baseline_label="python -m vllm.entrypoints.openai.api_server (vLLM 0.32 OpenAI server)",
        rows=load_rows(ours, vllm),
        notes=[
            f"levels (concurrency x requests): {list(plan.levels)}; {plan.repeats} repeats",
            f"engine flags of both servers: {' '.join(plan.engine_flags)}",
            tokens_per_chunk_note("ours", ours),
            tokens_per_chunk_note("vLLM", vllm),
        ],
    )
    high = [c for c in (32, 128) if c in ours] or sorted(ours)[-1:]
    for c in high:
        for name, must in (
            (f"c={c} req/s", "higher"),
            (f"c={c} output tok/s", "higher"),
            (f"c={c} TTFT p50", ""),
        ):
            row = result.row(name)
            met = row.ratio >= 1.0 if must else row.ratio <= 1.0
            what = ">= vllm serve" if must else "no worse than vllm serve"
            result.targets.append(Target(f"B3 {name} {what}", met, f"ratio {row.ratio:.2f}x"))
    return result


async def run_http(
    model_dir: Path, plan: HttpPlan, log_dir: Path, *, b3: bool, b4: bool
) -> list[BenchResult]:
    """Run B3 and/or B4; they share the worker (started once): B4 compares the router with it."""
    results: list[BenchResult] = []
    worker, grpc_port = await start_worker(model_dir, log_dir, plan.engine_flags)
    router: ServerProcess | None = None
    try:
        cpus, ours_placement = placement(worker, plan)
        if b4:
            router = await start_router(grpc_port, log_dir)
            if cpus is not None:
                pin(router.pid, cpus)
        servers = [worker, *([router] if router is not None else [])]
        for server in servers:
            await warm_up(server, plan)
        measured = await measure(servers, plan, cpus)
    finally:
        if router is not None:
            await router.stop()
        await worker.stop()
    ours = measured[0]
    if b3:
        vllm = await start_vllm(model_dir, log_dir, plan.engine_flags)
        try:
            vllm_cpus, vllm_placement = placement(vllm, plan)
            await warm_up(vllm, plan)
            (theirs,) = await measure([vllm], plan, vllm_cpus)
        finally:
            await vllm.stop()
        b3_result = http_result(ours, theirs, plan)
        b3_result.notes += [
            f"load generator beside ours: {ours_placement}",
            f"load generator beside vLLM: {vllm_placement}",
        ]
        results.append(b3_result)
    if router is not None:
        b4_result = router_result(measured[1], ours, plan.repeats)
        b4_result.notes += [
            f"engine flags of the worker: {' '.join(plan.engine_flags)}",
            f"router and load generator: {ours_placement}",
        ]
        results.append(b4_result)
    return results
