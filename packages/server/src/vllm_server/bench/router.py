"""B4 router: `vllm-frontend serve --remote` in front of a worker vs the worker alone, the load of B3.

The worker and its measurement come from `http_e2e.run_http`; repeats alternate between the two.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from vllm_server.bench.processes import ServerProcess, free_port, frontend_argv, start_server
from vllm_server.bench.report import BenchResult, Target

if TYPE_CHECKING:
    from vllm_server.bench.http_e2e import Measured

RATIO_TARGET = 0.8


async def start_router(worker_grpc_port: int, log_dir: Path) -> ServerProcess:
    """A router frontend over the worker's gRPC port (no gRPC listener of its own)."""
    port = free_port()
    argv = frontend_argv(
        "serve", "--remote", f"127.0.0.1:{worker_grpc_port}", "--host", "127.0.0.1", "--port", str(port),
        "--grpc-port", "-1", "--log-level", "warning",
    )  # fmt: skip
    return await start_server(
        "router", argv, base_url=f"http://127.0.0.1:{port}", ready_path="/ready", log_dir=log_dir
    )


def router_result(router: Measured, worker: Measured, repeats: int) -> BenchResult:
    """The B4 result: throughput of router -> worker vs the worker alone, at every level."""
    from vllm_server.bench.http_e2e import load_rows, tokens_per_chunk_note

    result = BenchResult(
        key="B4",
        title="router: router -> worker vs the worker alone (load of B3)",
        ours_label="vllm-frontend serve --remote (RemoteLlm) -> worker",
        baseline_label="the worker alone (vllm-frontend serve --model)",
        rows=load_rows(router, worker),
        notes=[f"{repeats} repeats, alternating", tokens_per_chunk_note("router", router)],
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
