"""Summaries of repeated measurements: min / median / max over repeats, and percentiles of samples."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Summary:
    """A figure measured `n` times: its min, median and max."""

    min: float
    median: float
    max: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        """The summary of `values` (NaN everywhere when there are none)."""
        if not values:
            return cls(math.nan, math.nan, math.nan, 0)
        return cls(min(values), statistics.median(values), max(values), len(values))

    def to_json(self) -> dict[str, float]:
        """`{min, median, max, n}`."""
        return {"min": self.min, "median": self.median, "max": self.max, "n": self.n}


def percentile(samples: Sequence[float], q: float) -> float:
    """The `q`-th percentile (0..100) of `samples`, linearly interpolated; NaN when empty."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)
