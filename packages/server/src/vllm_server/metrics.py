"""Prometheus metrics under vLLM's metric names (`vllm:*`), one registry per server.

Request metrics are recorded where the tokens pass (the HTTP and gRPC handlers): a handler calls
`metrics.start(...)`, reports each delta to the returned `RequestMetrics`, and finishes it once.
Engine gauges (running / waiting requests, KV-cache usage) come from the engine's scheduler stats
when the server owns an engine core, else from the server's own count of requests in flight.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

_LATENCY_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
_E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0)
_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)

#: Scheduler stats per engine index (vLLM SchedulerStats objects), or None without an engine.
EngineStats = Callable[[], dict[int, Any] | None]
#: The engine's multimodal cache counters since the last call (hits, total), or None.
CacheStats = Callable[[], Any]


class RequestMetrics:
    """The metrics of one request: feed it deltas, then finish it once."""

    __slots__ = ("_first", "_last", "_m", "_start", "_tokens", "done")

    def __init__(self, metrics: Metrics, prompt_tokens: int) -> None:
        self._m = metrics
        self._start = self._last = time.perf_counter()
        self._first = True
        self._tokens = 0
        self.done = False
        metrics.in_flight += 1
        metrics.prompt_tokens_of_model.inc(prompt_tokens)
        metrics.request_prompt_tokens_of_model.observe(prompt_tokens)

    def tokens(self, n: int) -> None:
        """`n` new output tokens arrived now."""
        if n <= 0:
            return
        now = time.perf_counter()
        m = self._m
        if self._first:
            self._first = False
            m.ttft_of_model.observe(now - self._start)
        else:
            m.itl_of_model.observe((now - self._last) / n)
        self._last = now
        self._tokens += n
        m.generation_tokens_of_model.inc(n)

    def finish(self, reason: str | None) -> None:
        """The request ended with `reason` (None: failed or cancelled)."""
        if self.done:
            return
        self.done = True
        m = self._m
        m.in_flight -= 1
        m.e2e_of_model.observe(time.perf_counter() - self._start)
        m.request_generation_tokens_of_model.observe(self._tokens)
        if reason is not None:
            m.success.labels(m.model_name, reason).inc()


class Metrics:
    """The server's Prometheus registry."""

    def __init__(
        self,
        model_name: str,
        engine_stats: EngineStats,
        mm_cache_stats: CacheStats | None = None,
        prefix_cache_totals: Callable[[], tuple[int, int]] | None = None,
        prompt_tokens_by_source: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        self.model_name = model_name
        self._mm_cache_stats = mm_cache_stats
        self.in_flight = 0
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        labels = ["model_name"]
        self.prompt_tokens = Counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed.", labels, registry=r
        )
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", labels, registry=r
        )
        self.success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*labels, "finished_reason"],
            registry=r,
        )
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            labels,
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            labels,
            buckets=_E2E_BUCKETS,
            registry=r,
        )
        self.request_prompt_tokens = Histogram(
            "vllm:request_prompt_tokens",
            "Number of prefill tokens processed.",
            labels,
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.request_generation_tokens = Histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            labels,
            buckets=_TOKEN_BUCKETS,
            registry=r,
        )
        self.http_requests = Counter(
            "http_requests",
            "HTTP requests by handler, method and status.",
            ["handler", "method", "status"],
            registry=r,
        )
        self.mm_cache_queries = Counter(
            "vllm:mm_cache_queries",
            "Multi-modal cache queries, in terms of number of queried items.",
            labels,
            registry=r,
        )
        self.mm_cache_hits = Counter(
            "vllm:mm_cache_hits",
            "Multi-modal cache hits, in terms of number of cached items.",
            labels,
            registry=r,
        )
        self.healthy = Gauge("vllm:healthy", "1 while the Llm is alive.", labels, registry=r)
        self.ready = Gauge("vllm:ready", "1 while the server takes new requests.", labels, registry=r)
        r.register(_EngineCollector(self, engine_stats, prefix_cache_totals, prompt_tokens_by_source))
        # This server's children (one model name), looked up once: `labels()` per token is not free.
        self.ttft_of_model = self.ttft.labels(model_name)
        self.itl_of_model = self.itl.labels(model_name)
        self.e2e_of_model = self.e2e.labels(model_name)
        self.generation_tokens_of_model = self.generation_tokens.labels(model_name)
        self.prompt_tokens_of_model = self.prompt_tokens.labels(model_name)
        self.request_prompt_tokens_of_model = self.request_prompt_tokens.labels(model_name)
        self.request_generation_tokens_of_model = self.request_generation_tokens.labels(model_name)

    def start(self, prompt_tokens: int) -> RequestMetrics:
        """Start recording one request."""
        return RequestMetrics(self, prompt_tokens)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        stats = self._mm_cache_stats() if self._mm_cache_stats is not None else None
        if stats is not None:
            self.mm_cache_queries.labels(self.model_name).inc(stats.total)
            self.mm_cache_hits.labels(self.model_name).inc(stats.hits)
        return generate_latest(self.registry)


class _EngineCollector(Collector):
    """Scheduler gauges, read when scraped."""

    def __init__(
        self,
        metrics: Metrics,
        engine_stats: EngineStats,
        prefix_cache_totals: Callable[[], tuple[int, int]] | None,
        prompt_tokens_by_source: Callable[[], dict[str, int]] | None,
    ) -> None:
        self._m = metrics
        self._stats = engine_stats
        self._prefix_cache_totals = prefix_cache_totals
        self._prompt_tokens_by_source = prompt_tokens_by_source

    def collect(self) -> Any:
        name = self._m.model_name
        stats = self._stats()
        if stats:
            running = sum(s.num_running_reqs for s in stats.values())
            waiting = sum(s.num_waiting_reqs for s in stats.values())
            usage = sum(s.kv_cache_usage for s in stats.values()) / len(stats)
        else:
            running, waiting, usage = self._m.in_flight, 0, 0.0
        for metric, doc, value in (
            ("vllm:num_requests_running", "Number of requests in model execution batches.", running),
            ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", waiting),
            ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage),
        ):
            family = GaugeMetricFamily(metric, doc, labels=["model_name"])
            family.add_metric([name], float(value))
            yield family
        if self._prefix_cache_totals is not None:
            queries, hits = self._prefix_cache_totals()
            for metric, doc, total in (
                (
                    "vllm:prefix_cache_queries",
                    "Prefix cache queries, in terms of number of queried tokens.",
                    queries,
                ),
                ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", hits),
            ):
                counter = CounterMetricFamily(metric, doc, labels=["model_name"])
                counter.add_metric([name], float(total))
                yield counter
        if self._prompt_tokens_by_source is not None:
            # vLLM's split of the prompt tokens: computed here, found in the local prefix cache, or
            # received from a KV connector (a prefill worker's, under prefill/decode disaggregation).
            counter = CounterMetricFamily(
                "vllm:prompt_tokens_by_source",
                "Number of prompt tokens by source.",
                labels=["model_name", "source"],
            )
            for source, total in self._prompt_tokens_by_source().items():
                counter.add_metric([name, source], float(total))
            yield counter

    def describe(self) -> Any:
        return []
