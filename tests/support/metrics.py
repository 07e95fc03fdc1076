"""Reading a Prometheus exposition in tests."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families


def families(text: str) -> dict[str, Any]:
    """The parsed exposition `text` by family name."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(text: str, name: str, **labels: str) -> float:
    """The sum of the samples called `name` in exposition `text` whose labels include `labels`."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total
