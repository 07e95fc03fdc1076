"""The ORCA load report's wording against vLLM's `create_orca_header`, and the figures it reads from the
server's registry (the differential test compares whole answers with vLLM's server)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import Gauge

from tests.support.quiet_import import quietly_import
from vllm_server.http.load_report import load_report
from vllm_server.metrics import Metrics

#: Figures a busy engine reports, and a data-parallel pair (the same names twice).
FIGURES: list[list[tuple[str, float]]] = [
    [],
    [("num_requests_waiting", 3.0), ("kv_cache_usage_perc", 0.4375)],
    [("num_requests_waiting", 0.0), ("kv_cache_usage_perc", 1e-05)],
    [
        ("num_requests_waiting", 1.0),
        ("num_requests_waiting", 2.0),
        ("kv_cache_usage_perc", 0.25),
        ("kv_cache_usage_perc", 0.5),
    ],
]


@pytest.mark.parametrize("metrics_format", ["TEXT", "JSON", "text", "jSoN", "XML", ""])
@pytest.mark.parametrize("named", FIGURES)
def test_wording_is_vllms(metrics_format: str, named: list[tuple[str, float]]) -> None:
    orca: Any = quietly_import("vllm.entrypoints.serve.utils.orca_metrics")
    theirs = orca.create_orca_header(metrics_format, named)
    assert load_report(metrics_format, named) == (None if theirs is None else theirs["endpoint-load-metrics"])


def test_figures_are_the_registrys_gauges_in_its_order() -> None:
    metrics = Metrics("tiny", lambda: pytest.fail("the report needs no Llm info"))
    labels = ["model_name", "engine"]
    usage = Gauge("vllm:kv_cache_usage_perc", "usage", labels, registry=metrics.registry)
    waiting = Gauge("vllm:num_requests_waiting", "waiting", labels, registry=metrics.registry)
    Gauge("vllm:num_requests_running", "running", labels, registry=metrics.registry).labels("tiny", "0").set(
        7
    )
    usage.labels("tiny", "0").set(0.5)
    waiting.labels("tiny", "0").set(2)
    waiting.labels("tiny", "1").set(4)
    names = {
        "vllm:num_requests_waiting": "num_requests_waiting",
        "vllm:kv_cache_usage_perc": "kv_cache_usage_perc",
    }
    assert metrics.gauge_samples(names) == [
        ("kv_cache_usage_perc", 0.5),
        ("num_requests_waiting", 2.0),
        ("num_requests_waiting", 4.0),
    ]
