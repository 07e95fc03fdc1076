"""The figures of B3 and B4 (HTTP load at each concurrency level) and the report rows made of them."""

from __future__ import annotations

from vllm_frontend_bench.loadgen import LoadStats
from vllm_frontend_bench.report import Row
from vllm_frontend_bench.stats import Summary

#: Per concurrency level: the figures of each repeat.
Measured = dict[int, list[LoadStats]]


def load_rows(ours: Measured, baseline: Measured) -> list[Row]:
    """Rows of every level: throughput (higher wins) and latency (lower wins)."""
    fields: list[tuple[str, str, str, bool]] = [
        ("requests_per_s", "req/s", "req/s", True),
        ("output_tokens_per_s", "output tok/s", "tok/s", True),
        ("ttft_p50_ms", "TTFT p50", "ms", False),
        ("ttft_p99_ms", "TTFT p99", "ms", False),
        ("itl_p50_ms", "ITL p50", "ms", False),
        ("itl_p99_ms", "ITL p99", "ms", False),
    ]
    rows = []
    for c in sorted(ours):
        for attr, label, unit, higher in fields:
            rows.append(
                Row(
                    f"c={c} {label}",
                    unit,
                    Summary.of([getattr(s, attr) for s in ours[c]]),
                    Summary.of([getattr(s, attr) for s in baseline.get(c, [])]),
                    better="higher" if higher else "lower",
                )
            )
    return rows


def tokens_per_chunk_note(label: str, measured: Measured) -> str:
    """How many tokens each content chunk carried on average, per level."""
    parts = [f"c={c}: {sum(s.tokens_per_chunk for s in v) / len(v):.2f}" for c, v in sorted(measured.items())]
    return f"{label} tokens per SSE chunk: " + ", ".join(parts)
