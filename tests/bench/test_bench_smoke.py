"""The benchmark code paths on tiny sizes (no timing assertions: performance is measured by `bench`)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from tests.support.mock import tiny_mock
from tests.support.servers import start_server
from vllm_frontend_bench.codec import run_codec
from vllm_frontend_bench.hop import HopPlan, HopScenario, hop_result, measure_hop
from vllm_frontend_bench.http_e2e import HttpPlan, cpu_result, gain_notes, http_result
from vllm_frontend_bench.loadgen import Load, LoadStats, run_load
from vllm_frontend_bench.report import BenchResult, Row, format_result, load_previous, write_results
from vllm_frontend_bench.router import router_result
from vllm_frontend_bench.slow_reader import SlowReaderPlan, run_slow_reader
from vllm_frontend_bench.stats import Summary, percentile
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


def test_stats() -> None:
    assert Summary.of([3.0, 1.0, 2.0]) == Summary(1.0, 2.0, 3.0, 3)
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)


def test_codec_bench_runs() -> None:
    result = run_codec(repeats=1, seconds_per_repeat=0.005)
    assert len(result.rows) == 6
    assert all(r.baseline is not None for r in result.rows)
    assert len(result.targets) == 1


async def test_hop_bench_runs() -> None:
    plan = HopPlan(scenarios=(HopScenario(2, 5), HopScenario(2, 10, paced=False)), repeats=1)
    result = hop_result(await measure_hop(plan), plan.repeats)
    rows = {r.name: r for r in result.rows}
    assert rows["S=2 @100 steps/s tokens/message"].ours.n == 1
    assert "S=2 flat out delivered tok/s" in rows
    assert [t.description.split(":")[0] for t in result.targets] == [
        "B1 S=2 @100 steps/s",
        "B1 S=2 @100 steps/s",
        "B1 S=2 flat out",
    ]


async def test_load_generator_against_a_mock_server(tiny_model_dir: Path) -> None:
    llm = tiny_mock(tiny_model_dir)
    running = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(llm))
    try:
        stats = await run_load(
            running.base_url, Load(concurrency=2, num_requests=4, max_tokens=5, model="tiny")
        )
    finally:
        await running.stop()
        await llm.shutdown()
    assert stats.failed == 0
    assert stats.output_tokens_per_s > 0
    assert stats.tokens_per_chunk >= 1


def _stats(rate: float, cpu: float = 0.1) -> LoadStats:
    return LoadStats(rate, rate * 10, 5.0, 9.0, 1.0, 2.0, 1.0, 0, cpu_s_per_1k_tokens=cpu)


def test_http_and_router_results() -> None:
    plan = HttpPlan(levels=((1, 2), (32, 4)), repeats=2)
    ours = {1: [_stats(1.0), _stats(1.2)], 32: [_stats(8.0, 0.06), _stats(9.0, 0.06)]}
    vllm = {1: [_stats(1.0)], 32: [_stats(10.0)]}
    placed = {1: [_stats(1.0)], 32: [_stats(7.0)]}
    b3 = http_result(ours, vllm, plan)
    assert b3.row("c=32 req/s").ratio == pytest.approx(0.85)
    assert b3.row("c=32 frontend CPU s per 1k output tokens").ratio == pytest.approx(0.6)
    assert [(t.description, t.met) for t in b3.targets] == [
        ("B3 c=32 output tok/s >= 1.25x vllm serve as deployed", False),
        ("B3 c=32 TTFT p50 no worse than vllm serve as deployed", True),
    ]
    b3p = http_result(ours, placed, plan, placed=True)
    assert b3p.key == "B3p"
    assert [(t.description, t.met) for t in b3p.targets] == [
        ("B3p c=32 output tok/s >= 1.1x vllm serve placed like ours", True),  # 8.5 / 7 = 1.21
        ("B3p c=32 TTFT p50 no worse than vllm serve placed like ours", True),
    ]
    assert gain_notes(ours, placed, vllm)[1] == (
        "c=32 output tok/s: frontend gain (ours / vLLM placed like ours) 1.21x, placement gain (vLLM "
        "placed like ours / as deployed) 0.70x, together (ours / vLLM as deployed) 0.85x"
    )
    router = {1: [_stats(1.0, 0.2)], 32: [_stats(8.0, 0.08)]}
    b3c = cpu_result(ours, router, vllm, "placed like ours")
    assert [(t.description, t.met, t.detail) for t in b3c.targets] == [
        ("B3c c=32 worker frontend CPU per output token <= 0.7x vLLM's API server", True, "ratio 0.60x"),
        ("B3c c=32 router CPU per output token <= 1.0x vLLM's API server", True, "ratio 0.80x (aim: 0.5x)"),
    ]
    assert cpu_result(ours, None, vllm, "as deployed").notes[-1].startswith("router: not measured")
    b4 = router_result(vllm, ours, repeats=2)  # "router" vLLM's figures, "worker alone" ours
    assert [(t.description, t.met, t.detail) for t in b4.targets if "tok/s" in t.description] == [
        ("B4 c=1 output tok/s >= 0.95 x worker alone", False, "ratio 0.91x"),  # 1.0 / 1.1
        ("B4 c=32 output tok/s >= 0.95 x worker alone", True, "ratio 1.18x"),  # 10 / 8.5
    ]


def test_results_file_keeps_the_previous_run(tmp_path: Path) -> None:
    path = tmp_path / "latest.json"
    result = BenchResult(
        "B9", "t", "ours", "base", rows=[Row("x", "us", Summary.of([2.0]), Summary.of([4.0]))]
    )
    write_results(path, [result], command="first", settings={})
    previous = load_previous(path)
    assert previous is not None
    result.rows[0] = Row("x", "us", Summary.of([3.0]), Summary.of([4.0]))
    write_results(path, [result], command="second", settings={})
    assert json.loads((tmp_path / "previous.json").read_text())["command"] == "first"
    table = format_result(result, previous["benchmarks"]["B9"])
    assert "+50.0%" in table
    assert "0.75x" in table


async def test_bench_command_quick_codec(tmp_path: Path) -> None:
    out = tmp_path / "r" / "latest.json"
    flags = ["--only", "B2", "--quick", "--repeats", "1", "--output", str(out)]
    # The console script `make bench` runs, from the bench's own distribution.
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("vllm-frontend-bench")), *flags, stdout=asyncio.subprocess.PIPE
    )
    stdout, _ = await asyncio.wait_for(process.communicate(), 300)
    printed = stdout.decode()
    assert process.returncode == 0, printed
    assert "B2 codec" in printed
    assert "--quick: smoke sizes" in printed  # a smoke run does not pass for a judgement of the targets
    results = json.loads(out.read_text())
    assert set(results["benchmarks"]) == {"B2"}
    assert results["command"].split()[:3] == ["vllm-frontend-bench", "--only", "B2"]


async def test_slow_reader_bench_runs() -> None:
    result = await run_slow_reader(SlowReaderPlan(streams=2, tokens=5, work_us=1.0, repeats=1))
    assert len(result.rows) == 4
    assert result.rows[0].ours.n == result.rows[0].baseline.n == 1  # type: ignore[union-attr]
