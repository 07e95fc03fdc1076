"""The ORCA load report: the `endpoint-load-metrics` response header a client asks for with
`endpoint-load-metrics-format: TEXT` or `JSON`, as vLLM's server adds it.

vLLM's chat and completion routes (and `/invocations`, which calls them) add it to a whole, successful
response, never to a stream or an error; the format is matched without regard to case and any other
format gets no header. The report names the gauges `vllm:num_requests_waiting` and
`vllm:kv_cache_usage_perc` of the server's Prometheus registry, read once the response is built, in the
registry's order, one entry per sample (a data-parallel engine's last sample wins in JSON, as vLLM's):

    endpoint-load-metrics: TEXT named_metrics.num_requests_waiting=0.0, named_metrics.kv_cache_usage_perc=0.0
    endpoint-load-metrics: JSON {"named_metrics": {"num_requests_waiting": 0.0, "kv_cache_usage_perc": 0.0}}

A worker reports its engine's figures (those `/metrics` shows; none while the engine logs no stats, as
vLLM's server with `--disable-log-stats` names none). A router (the server over a `RemoteLlm`) reports
its own view, which names no metric: the header describes the endpoint that answered, and a router is the
endpoint its clients and their balancer see. Relaying the figures of the worker that served one request
would describe a process the balancer cannot address, among several the router balances over itself (the
next request may go to another), and has no queue or KV cache of its own to describe.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from fastapi import Request, Response

from vllm_server.metrics import Metrics

__all__ = ["FORMAT_HEADER", "REPORT_HEADER", "load_report", "with_load_report"]

#: The request header asking for a report, and its format.
FORMAT_HEADER = "endpoint-load-metrics-format"
#: The response header carrying the report.
REPORT_HEADER = "endpoint-load-metrics"
#: The gauges reported: Prometheus name to ORCA name (vLLM's `prometheus_to_orca_metrics`).
_GAUGES: Mapping[str, str] = {
    "vllm:kv_cache_usage_perc": "kv_cache_usage_perc",
    "vllm:num_requests_waiting": "num_requests_waiting",
}


def load_report(metrics_format: str, named_metrics: list[tuple[str, float]]) -> str | None:
    """The report of `named_metrics` in `metrics_format` (`text` or `json`, any case), else None."""
    match metrics_format.lower():
        case "text":
            return "TEXT " + ", ".join(f"named_metrics.{name}={value}" for name, value in named_metrics)
        case "json":
            return "JSON " + json.dumps({"named_metrics": dict(named_metrics)})
        case _:
            return None


def with_load_report(request: Request, response: Response, metrics: Metrics) -> Response:
    """`response`, with the report `request` asks for when it is a success."""
    metrics_format = request.headers.get(FORMAT_HEADER, "")
    if metrics_format and response.status_code == 200:
        report = load_report(metrics_format, metrics.gauge_samples(_GAUGES))
        if report is not None:
            response.headers[REPORT_HEADER] = report
    return response
