"""Benchmark results: rows of ours-vs-baseline figures, targets, printing and the JSON results file.

Each row compares one figure of ours with its baseline measured in the same run, both as min / median /
max over repeats; the ratio is of the medians. The results file keeps the previous run beside it
(`previous.json`) and every printed row shows the change of our median since that run.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vllm_frontend_bench.stats import Summary

Better = Literal["higher", "lower"]


@dataclass(frozen=True, slots=True)
class Row:
    """One figure: ours and the baseline's, in `unit`; `better` says which direction wins."""

    name: str
    unit: str
    ours: Summary
    baseline: Summary | None
    better: Better = "higher"

    @property
    def ratio(self) -> float:
        """ours / baseline (medians); NaN without a baseline."""
        if self.baseline is None or not self.baseline.median:
            return math.nan
        return self.ours.median / self.baseline.median

    def to_json(self) -> dict[str, Any]:
        """The row as plain JSON."""
        return {
            "name": self.name,
            "unit": self.unit,
            "better": self.better,
            "ours": self.ours.to_json(),
            "baseline": self.baseline.to_json() if self.baseline is not None else None,
            "ratio": self.ratio,
        }


@dataclass(frozen=True, slots=True)
class Target:
    """A stated performance target and whether this run met it."""

    description: str
    met: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        """The target as plain JSON."""
        return {"description": self.description, "met": self.met, "detail": self.detail}


@dataclass(slots=True)
class BenchResult:
    """What one benchmark measured."""

    key: str
    title: str
    ours_label: str
    baseline_label: str
    rows: list[Row] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def row(self, name: str) -> Row:
        """The row called `name`."""
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON."""
        return {
            "title": self.title,
            "ours": self.ours_label,
            "baseline": self.baseline_label,
            "rows": [r.to_json() for r in self.rows],
            "targets": [t.to_json() for t in self.targets],
            "notes": self.notes,
        }


# ---- printing ---------------------------------------------------------------------------------------


def _num(x: float) -> str:
    if math.isnan(x):
        return "-"
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 10_000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _triple(s: Summary | None) -> str:
    if s is None:
        return "-"
    return f"{_num(s.min)} / {_num(s.median)} / {_num(s.max)}"


def _change(row: Row, previous: dict[str, Any] | None) -> str:
    if previous is None:
        return "(new)"
    before = float(previous["ours"]["median"])
    if not before or math.isnan(before) or math.isnan(row.ours.median):
        return "-"
    return f"{(row.ours.median / before - 1) * 100:+.1f}%"


def format_result(result: BenchResult, previous: dict[str, Any] | None = None) -> str:
    """A table of `result`: figure, ours, baseline (min / median / max), ratio, change since last run."""
    prev_rows = {r["name"]: r for r in (previous or {}).get("rows", [])}
    header = ("figure", "ours min / med / max", "baseline min / med / max", "ratio", "vs last")
    lines = [[row.name + f" [{row.unit}]", _triple(row.ours), _triple(row.baseline)] for row in result.rows]
    table = [
        [*cells, "-" if math.isnan(row.ratio) else f"{row.ratio:.2f}x", _change(row, prev_rows.get(row.name))]
        for cells, row in zip(lines, result.rows, strict=True)
    ]
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h) for i, h in enumerate(header)]
    out = [
        f"== {result.key} {result.title}",
        f"   ours: {result.ours_label}",
        f"   baseline: {result.baseline_label}",
        "   " + "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)),
    ]
    out += ["   " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in table]
    for note in result.notes:
        out.append(f"   note: {note}")
    for target in result.targets:
        out.append(f"   [{'MET' if target.met else 'NOT MET'}] {target.description}: {target.detail}")
    return "\n".join(out)


# ---- the results file -------------------------------------------------------------------------------


def load_previous(path: Path) -> dict[str, Any] | None:
    """The results of the last run at `path`, if any (read before this run overwrites it)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data


def write_results(
    path: Path, results: Iterable[BenchResult], *, command: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """Write this run to `path`, keeping the run it replaces as `previous.json` beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        shutil.copyfile(path, path.with_name("previous.json"))
    data = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": command,
        "settings": settings,
        "benchmarks": {r.key: r.to_json() for r in results},
    }
    path.write_text(json.dumps(data, indent=2, allow_nan=True) + "\n", encoding="utf-8")
    return data
