"""B5 router vs router: our router and vLLM's Rust router (`vllm-router`) in front of the same worker.

The worker is B3's (`vllm-frontend serve --model`), and it speaks vLLM's `vllm.Inference` gRPC service,
so `vllm-router --worker-urls grpc://HOST:PORT` routes to it as it would to vLLM's own gRPC server. Three
arms take the load of B3 in turn (alternating, every repeat): the worker alone, our router
(`vllm-frontend serve --remote`, B4's) in front of it, and `vllm-router` in front of it. Only the router
differs. `vllm-router` learns the model from the worker (`GetModelInfo`'s `model_id`, the model
directory the worker was started with) and loads its tokenizer from there; `VLLM_ROUTER_TOKENIZER`
names the same directory, so it never looks on the Hugging Face hub.

`vllm-router` is installed from PyPI, pinned (`VLLM_ROUTER_VERSION`), into an environment of its own
under the user's cache (`router_env_dir`), never into the project's; the first B5 run installs it
(with `uv` when there is one, else `venv` + `pip`), later runs reuse it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
from pathlib import Path

from vllm_frontend_bench.cpu import CpuOf
from vllm_frontend_bench.http_figures import (
    Measured,
    cpu_row,
    failure_target,
    load_rows,
    tokens_agree_target,
    tokens_per_chunk_note,
)
from vllm_frontend_bench.loadgen import LoadStats
from vllm_frontend_bench.report import BenchResult, Row, Target
from vllm_frontend_bench.stats import Summary
from vllm_frontend_testing.processes import ServerProcess, free_port, start_server

#: The release of `vllm-router` the issue names (PyPI).
VLLM_ROUTER_VERSION = "0.1.17"
#: The levels whose targets count (as B3's).
TARGET_LEVELS = (32, 128)


class RouterInstallError(RuntimeError):
    """`vllm-router` could not be installed into its environment."""


def router_env_dir() -> Path:
    """Where `vllm-router` lives: `$XDG_CACHE_HOME` (default `~/.cache`)/vllm-frontend-bench/..."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "vllm-frontend-bench" / f"vllm-router-{VLLM_ROUTER_VERSION}"


def install_commands(env: Path, uv: str | None) -> list[list[str]]:
    """The commands that create `env` and install the pinned `vllm-router` into it."""
    requirement = f"vllm-router=={VLLM_ROUTER_VERSION}"
    python = str(env / "bin" / "python")
    if uv is not None:
        return [
            [uv, "venv", "--quiet", "--python", sys.executable, str(env)],
            [uv, "pip", "install", "--quiet", "--python", python, requirement],
        ]
    return [
        [sys.executable, "-m", "venv", str(env)],
        [python, "-m", "pip", "install", "--quiet", requirement],
    ]


async def ensure_vllm_router(env: Path | None = None) -> Path:
    """The `vllm-router` executable, installed into `env` (default `router_env_dir()`) on first use.

    Cancelled (a caller's `asyncio.timeout`), it kills the install command it is waiting for.
    """
    env = env or router_env_dir()
    executable = env / "bin" / "vllm-router"
    installed = env / ".installed"  # written last: a half-made environment is made again
    if installed.exists() and executable.exists():
        return executable
    shutil.rmtree(env, ignore_errors=True)
    env.parent.mkdir(parents=True, exist_ok=True)
    print(f"B5: installing vllm-router=={VLLM_ROUTER_VERSION} into {env} (once)", flush=True)
    for argv in install_commands(env, shutil.which("uv")):
        try:
            process = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
            )
        except OSError as exc:
            raise RouterInstallError(_install_failed(env, argv, str(exc))) from exc
        try:
            output, _ = await process.communicate()
        except BaseException:  # cancelled: the command stops with the install
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        if process.returncode != 0:
            raise RouterInstallError(_install_failed(env, argv, output.decode(errors="replace")))
    if not executable.exists():
        raise RouterInstallError(_install_failed(env, [], f"{executable} is missing after the install"))
    installed.write_text(f"vllm-router=={VLLM_ROUTER_VERSION}\n", encoding="utf-8")
    return executable


def _install_failed(env: Path, argv: list[str], output: str) -> str:
    tail = "\n".join(output.strip().splitlines()[-15:])
    return (
        f"B5 needs vllm-router=={VLLM_ROUTER_VERSION} (PyPI) and could not install it into {env}"
        + (f"\n  command: {' '.join(argv)}" if argv else "")
        + f"\n  {tail}\n"
        f"Install it there yourself (uv venv {env} && uv pip install --python {env}/bin/python "
        f"vllm-router=={VLLM_ROUTER_VERSION}), or leave B5 out (--only B1,B1r,B2,B3,B4)."
    )


def not_run(key: str, why: str) -> BenchResult:
    """The result of a benchmark that could not run: a NOT MET target saying why (the run goes on)."""
    print(f"{key} not run: {why}", file=sys.stderr, flush=True)
    first = why.strip().splitlines()[0] if why.strip() else why
    return BenchResult(
        key=key,
        title="router vs router: not run",
        ours_label="-",
        baseline_label="-",
        notes=why.strip().splitlines(),
        targets=[Target(f"{key} ran", False, first)],
    )


def vllm_router_argv(
    executable: Path, *, port: int, worker_grpc_port: int, prometheus_port: int
) -> list[str]:
    """`vllm-router` in front of one gRPC worker, round robin, its Prometheus endpoint on a free port."""
    return [
        str(executable), "--host", "127.0.0.1", "--port", str(port),
        "--worker-urls", f"grpc://127.0.0.1:{worker_grpc_port}", "--policy", "round_robin",
        "--prometheus-host", "127.0.0.1", "--prometheus-port", str(prometheus_port),
        "--log-level", "warning",
    ]  # fmt: skip


def vllm_router_env(model_dir: Path) -> dict[str, str]:
    """The router's environment: this one, with its tokenizer named (the worker's model directory)."""
    return {**os.environ, "VLLM_ROUTER_TOKENIZER": str(model_dir)}


async def start_vllm_router(
    executable: Path, worker_grpc_port: int, model_dir: Path, log_dir: Path
) -> ServerProcess:
    """`vllm-router` over the worker's gRPC port; ready once its `/readiness` answers 200."""
    port = free_port()
    argv = vllm_router_argv(
        executable, port=port, worker_grpc_port=worker_grpc_port, prometheus_port=free_port()
    )
    return await start_server(
        "vllm-router",
        argv,
        http_port=port,
        ready_path="/readiness",
        log_path=log_dir / "vllm-router.log",
        env=vllm_router_env(model_dir),
    )


def router_cpu(server: ServerProcess) -> CpuOf:
    """A router's CPU: its process and any below it."""
    return CpuOf(server.pid, children=True)


def _ratio_row(c: int, ours: list[LoadStats], theirs: list[LoadStats], alone: list[LoadStats]) -> Row:
    """Per repeat, each router's output tok/s over the worker alone's in the same round."""

    def ratios(router: list[LoadStats]) -> Summary:
        return Summary.of(
            [r.output_tokens_per_s / a.output_tokens_per_s for r, a in zip(router, alone, strict=False)]
        )

    return Row(f"c={c} output tok/s / worker alone", "x", ratios(ours), ratios(theirs))


def _ratio(row: Row) -> str:
    return f"ratio {row.ratio:.2f}x"


def vllm_router_result(ours: Measured, theirs: Measured, alone: Measured, max_tokens: int) -> BenchResult:
    """The B5 result: our router vs `vllm-router` in front of the same worker, both against it alone."""
    result = BenchResult(
        key="B5",
        title="router vs router: ours and vLLM's Rust router in front of the same worker (load of B3)",
        ours_label="vllm-frontend serve --remote --remote-mux (RemoteLlm) -> worker",
        baseline_label=f"vllm-router {VLLM_ROUTER_VERSION} --policy round_robin -> grpc:// worker",
        rows=[],
        notes=[
            tokens_per_chunk_note("our router", ours),
            tokens_per_chunk_note("vllm-router", theirs),
            "CPU: each router's process and its children, /proc utime + stime over the load",
        ],
    )
    for c in sorted(ours):
        result.rows += load_rows({c: ours[c]}, {c: theirs.get(c, [])})
        result.rows.append(cpu_row(f"c={c} router CPU s per 1k output tokens", ours[c], theirs.get(c, [])))
        result.rows.append(_ratio_row(c, ours[c], theirs.get(c, []), alone.get(c, [])))
        worker = Summary.of([s.output_tokens_per_s for s in alone.get(c, [])])
        result.notes.append(f"c={c}: the worker alone {worker.median:,.0f} tok/s (median)")
    for c in [c for c in TARGET_LEVELS if c in ours] or sorted(ours)[-1:]:
        tok = result.row(f"c={c} output tok/s")
        ttft = result.row(f"c={c} TTFT p50")
        result.targets += [
            Target(f"B5 c={c} output tok/s >= vllm-router's", tok.ratio >= 1.0, _ratio(tok)),
            Target(f"B5 c={c} TTFT p50 no worse than vllm-router's", ttft.ratio <= 1.0, _ratio(ttft)),
        ]
    arms = {"worker alone": alone, "our router": ours, "vllm-router": theirs}
    result.targets += [tokens_agree_target("B5", max_tokens, arms), failure_target("B5", arms)]
    return result
