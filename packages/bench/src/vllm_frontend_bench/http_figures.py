"""The figures of B3, B4 and B5 (HTTP load at each concurrency level) and the report rows made of them."""

from __future__ import annotations

import math
from collections.abc import Mapping

from vllm_frontend_bench.loadgen import LoadStats
from vllm_frontend_bench.report import Row, Target
from vllm_frontend_bench.stats import Summary

#: Per concurrency level: the figures of each repeat.
Measured = dict[int, list[LoadStats]]

#: The figures of every level: (LoadStats attribute, row label, unit, higher wins).
_FIELDS: list[tuple[str, str, str, bool]] = [
    ("requests_per_s", "req/s", "req/s", True),
    ("output_tokens_per_s", "output tok/s", "tok/s", True),
    ("ttft_p50_ms", "TTFT p50", "ms", False),
    ("ttft_p99_ms", "TTFT p99", "ms", False),
    ("itl_p50_ms", "ITL p50", "ms", False),
    ("itl_p99_ms", "ITL p99", "ms", False),
    ("failed", "failed requests", "req", False),
]
#: The CPU row's label (`LoadStats.cpu_s_per_1k_tokens` of the process(es) each arm watched).
CPU_LABEL = "CPU s per 1k output tokens"


def load_rows(ours: Measured, baseline: Measured, *, cpu: str | None = None) -> list[Row]:
    """Rows of every level: throughput (higher wins), latency and failures (lower wins); with `cpu`
    (what the CPU figures count, in words), a CPU row per level as well."""
    rows = []
    for c in sorted(ours):
        for attr, label, unit, higher in _FIELDS:
            rows.append(
                Row(
                    f"c={c} {label}",
                    unit,
                    Summary.of([float(getattr(s, attr)) for s in ours[c]]),
                    Summary.of([float(getattr(s, attr)) for s in baseline.get(c, [])]),
                    better="higher" if higher else "lower",
                )
            )
        if cpu is not None:
            rows.append(cpu_row(f"c={c} {cpu} {CPU_LABEL}", ours[c], baseline.get(c, [])))
    return rows


def cpu_row(name: str, ours: list[LoadStats], baseline: list[LoadStats]) -> Row:
    """CPU seconds per 1,000 output tokens of two arms (lower wins)."""

    def of(stats: list[LoadStats]) -> Summary:
        return Summary.of([s.cpu_s_per_1k_tokens for s in stats if not math.isnan(s.cpu_s_per_1k_tokens)])

    return Row(name, "s", of(ours), of(baseline), better="lower")


def failure_target(key: str, arms: Mapping[str, Measured]) -> Target:
    """ "No request fails": met when no arm lost a request; the detail counts them per arm and kind."""
    parts = []
    total = 0
    for label, measured in arms.items():
        runs = [s for level in measured.values() for s in level]
        failed = sum(s.failed for s in runs)
        total += failed
        kinds: dict[str, int] = {}
        for s in runs:
            for kind, n in s.failure_kinds:
                kinds[kind] = kinds.get(kind, 0) + n
        what = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
        parts.append(f"{label} {failed}" + (f" ({what})" if what else ""))
    return Target(f"{key} no request fails", total == 0, "failed requests: " + "; ".join(parts))


def tokens_per_chunk_note(label: str, measured: Measured) -> str:
    """How many tokens each content chunk carried on average, per level."""
    parts = [f"c={c}: {sum(s.tokens_per_chunk for s in v) / len(v):.2f}" for c, v in sorted(measured.items())]
    return f"{label} tokens per SSE chunk: " + ", ".join(parts)


def completion_tokens(measured: Measured) -> dict[int, int]:
    """How many requests reported each `completion_tokens`, over every level and repeat."""
    counts: dict[int, int] = {}
    for level in measured.values():
        for s in level:
            for tokens, n in s.completion_tokens:
                counts[tokens] = counts.get(tokens, 0) + n
    return counts


def tokens_agree_target(key: str, max_tokens: int, arms: Mapping[str, Measured]) -> Target:
    """Every request of every arm returned `max_tokens` output tokens (`ignore_eos`): the arms did the
    same work, so their throughputs compare."""
    parts = []
    agree = True
    for label, measured in arms.items():
        counts = completion_tokens(measured)
        agree = agree and set(counts) == {max_tokens}
        parts.append(f"{label} " + ", ".join(f"{n} x {t}" for t, n in sorted(counts.items())))
    return Target(
        f"{key} check: every arm's requests returned max_tokens={max_tokens} output tokens",
        agree,
        "requests x output tokens: " + "; ".join(parts),
    )
