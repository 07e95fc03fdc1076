"""B4 router: `vllm-frontend serve --remote` in front of a worker vs the worker alone, the load of B3.

The worker and its measurement come from `http_e2e.run_http`; repeats alternate between the two.
"""

from __future__ import annotations

from pathlib import Path

from vllm_frontend_bench.http_figures import Measured, load_rows, tokens_per_chunk_note
from vllm_frontend_bench.report import BenchResult, Target
from vllm_frontend_testing.processes import ServerProcess, free_port, frontend_argv, start_server

#: Issue #22: the hop nearly free.
RATIO_TARGET = 0.95


async def start_router(worker_grpc_port: int, log_dir: Path) -> ServerProcess:
    """A router frontend over the worker's gRPC port (no gRPC listener of its own), all its requests on
    one GenerateMux stream (`--remote-mux`: the target is one worker)."""
    port = free_port()
    argv = frontend_argv(
        "serve", "--remote", f"127.0.0.1:{worker_grpc_port}", "--host", "127.0.0.1", "--port", str(port),
        "--grpc-port", "-1", "--log-level", "warning", "--remote-mux",
    )  # fmt: skip
    return await start_server(
        "router", argv, http_port=port, ready_path="/ready", log_path=log_dir / "router.log"
    )


def router_result(router: Measured, worker: Measured, repeats: int) -> BenchResult:
    """The B4 result: throughput of router -> worker vs the worker alone, at every level."""
    result = BenchResult(
        key="B4",
        title="router: router -> worker vs the worker alone (load of B3)",
        ours_label="vllm-frontend serve --remote --remote-mux (RemoteLlm) -> worker",
        baseline_label="the worker alone (vllm-frontend serve --model)",
        rows=load_rows(router, worker, cpu="frontend"),
        notes=[
            f"{repeats} repeats, alternating",
            tokens_per_chunk_note("router", router),
            "frontend CPU: the router's process (and any below it) vs the worker's main process (not its "
            "engine core)",
        ],
    )
    for c in sorted(router):
        for name in (f"c={c} req/s", f"c={c} output tok/s"):
            row = result.row(name)
            result.targets.append(
                Target(
                    f"B4 {name} >= {RATIO_TARGET} x worker alone",
                    row.ratio >= RATIO_TARGET,
                    f"ratio {row.ratio:.2f}x",
                )
            )
    return result
