"""`vllm-frontend-bench`: run the benchmarks, print each figure beside its baseline, write the results.

vllm-frontend-bench                      # B1-B5, full sizes
vllm-frontend-bench --quick              # small sizes, one repeat (CI-like)
vllm-frontend-bench --only B1,B2 --output bench-results/latest.json
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from vllm_frontend_bench.report import BenchResult, format_result, load_previous, write_results

ALL = ("B1", "B1r", "B2", "B3", "B4", "B5")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return run_bench(args)


def parser() -> argparse.ArgumentParser:
    """The `vllm-frontend-bench` argument parser."""
    bench = argparse.ArgumentParser(prog="vllm-frontend-bench", description=__doc__.splitlines()[0])
    bench.add_argument(
        "--only",
        default=",".join(ALL),
        help="comma-separated subset of B1,B1r,B2,B3,B4,B5 (B3 prints B3, B3p and B3c)",
    )
    bench.add_argument("--quick", action="store_true", help="small sizes and one repeat (a smoke run)")
    bench.add_argument("--repeats", type=int, help="repeats per figure (default 5 for B2, 3 otherwise)")
    bench.add_argument("--output", type=Path, default=Path("bench-results/latest.json"))
    bench.add_argument("--model", type=Path, help="model directory for B3-B5 (default: the tiny model)")
    bench.add_argument("--max-tokens", type=int, help="B3-B5 max_tokens per request")
    bench.add_argument(
        "--stream-interval", type=int, help="B3-B5: --stream-interval of every server (default 1, vLLM's)"
    )
    bench.add_argument(
        "--no-isolate",
        action="store_true",
        help="B3-B5: let the load generator and the routers share the engine's bound CPUs",
    )
    bench.add_argument("--log-dir", type=Path, help="server logs of B3-B5 (default: beside --output)")
    bench.add_argument("--log-level", default="warning", help=argparse.SUPPRESS)
    return bench


def run_bench(args: argparse.Namespace) -> int:
    """Run the selected benchmarks; exit 0 (targets not met are reported, not failed)."""
    selected = [k.strip().upper() for k in args.only.split(",") if k.strip()]
    unknown = sorted(set(selected) - {k.upper() for k in ALL})
    if unknown:
        raise SystemExit(f"--only: unknown benchmark(s) {unknown}; choose from {list(ALL)}")
    previous = load_previous(args.output)
    before = (previous or {}).get("benchmarks", {})
    print(f"machine load average (1 min) before the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    if previous is not None:
        print(f"comparing with the last run ({previous.get('time', '?')}: {previous.get('command', '?')})")
    results: list[BenchResult] = []

    def emit(result: BenchResult) -> None:
        # Other processes on the machine skew every figure: say how busy it was while this one ran.
        load_now = os.getloadavg()[0]
        result.notes.append(f"machine load average (1 min) at the end of this benchmark: {load_now:.2f}")
        results.append(result)
        print(format_result(result, before.get(result.key)), end="\n\n", flush=True)

    asyncio.run(_run(selected, args, emit))
    results.sort(key=lambda r: r.key)
    command = shlex.join(["vllm-frontend-bench", *sys.argv[1:]])
    write_results(args.output, results, command=command, settings={"quick": args.quick, "only": selected})
    targets = [t for r in results for t in r.targets]
    print(f"targets met: {sum(t.met for t in targets)} of {len(targets)}; results written to {args.output}")
    if args.quick:
        print("  (--quick: smoke sizes; the targets are stated for the full sizes, judge them there)")
    for target in targets:
        print(f"  [{'MET' if target.met else 'NOT MET'}] {target.description}: {target.detail}")
    return 0


async def _run(selected: list[str], args: argparse.Namespace, emit: Callable[[BenchResult], None]) -> None:
    """Run the selected benchmarks in the order B2, B1, B1r, B3+B4+B5 (they share the worker)."""
    quick = args.quick
    if "B2" in selected:
        from vllm_frontend_bench.codec import run_codec

        emit(run_codec(repeats=args.repeats or (2 if quick else 5), seconds_per_repeat=0.1 if quick else 0.2))
    if "B1" in selected:
        from vllm_frontend_bench.hop import QUICK_HOP, HopPlan, hop_result, measure_hop

        plan = QUICK_HOP if quick else HopPlan()
        if args.repeats:
            plan = dataclasses.replace(plan, repeats=args.repeats)
        emit(hop_result(await measure_hop(plan), plan.repeats))
    if "B1R" in selected:
        from vllm_frontend_bench.slow_reader import QUICK_SLOW_READER, SlowReaderPlan, run_slow_reader

        slow = QUICK_SLOW_READER if quick else SlowReaderPlan()
        if args.repeats:
            slow = dataclasses.replace(slow, repeats=args.repeats)
        emit(await run_slow_reader(slow))
    if {"B3", "B4", "B5"} & set(selected):
        from vllm_frontend_bench.http_e2e import QUICK_HTTP, HttpPlan, run_http

        http = QUICK_HTTP if quick else HttpPlan()
        if args.repeats:
            http = dataclasses.replace(http, repeats=args.repeats)
        if args.max_tokens:
            http = dataclasses.replace(http, max_tokens=args.max_tokens)
        if args.stream_interval:
            http = dataclasses.replace(http, stream_interval=args.stream_interval)
        if args.no_isolate:
            http = dataclasses.replace(http, isolate=False)
        model = args.model or _tiny_model()
        log_dir = args.log_dir or args.output.parent / "logs"
        b3, b4, b5 = ("B3" in selected), ("B4" in selected), ("B5" in selected)
        for result in await run_http(model, http, log_dir, b3=b3, b4=b4, b5=b5):
            emit(result)


def _tiny_model() -> Path:
    from vllm_frontend_testing.tiny_model import build_tiny_model

    return build_tiny_model()


if __name__ == "__main__":
    sys.exit(main())
