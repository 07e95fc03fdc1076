"""Prometheus metrics under vLLM 0.32's names, types, documentation, labels and buckets; one registry per
server (vLLM's `PrometheusStatLogger`, vllm/v1/metrics/loggers.py).

Where each figure comes from:

- Request metrics are recorded where the tokens pass. A handler (HTTP routes, `vllm.Inference`, the
  internal `vllm.internal.Llm/Generate`) calls `metrics.start(...)`, reports each delta to the returned
  `RequestMetrics` and finishes it once: TTFT, inter-token latency, e2e latency, prompt / generation
  tokens, `request_success`, the request-size histograms and the `n` parameter.
- Per engine request, `tap(stream, request)` reads the final `GenerateOutput.timings` an engine that logs
  stats attaches (vLLM's FinishedRequestStats: queue, prefill, decode and inference time, preemptions)
  and records the per-phase histograms, time per output token, `max_tokens` and the prefill KV tokens
  computed. A router receives `timings` from its workers over the wire, so it records measured values.
- Engine metrics (scheduler gauges, KV-cache usage, prefix / multimodal cache counters, preemptions,
  prompt tokens by source, `iteration_tokens_total`, `cache_config_info`, `lora_requests_info`,
  `engine_sleep_state`, and `admission_rejections`, which counts the requests the queue limits refused
  (`--max-num-queued-reqs`, `--max-num-queued-tokens`, enforced by `EngineCoreLlm`)) exist only on a
  server that owns its engine core and only while the engine logs stats. A server over a provided
  `Llm` (a router, a mock) has no engine to read, so it exposes none of them: it reports no gauge it
  did not measure or receive.

The `engine` label: on a server owning its engine core, the engine index as vLLM labels it ("0"; with
data parallelism the engine gauges and counters carry each engine's index, and the request metrics,
measured in the frontend, carry the first index). On a server over a provided `Llm` the request metrics
carry ``engine="frontend"``: they were measured (or received) by this frontend, not by one engine.

With its engine's stats off (`--disable-log-stats`), a server owning its engine core records and exposes
no `vllm:` family at all, as vLLM's server, whose PrometheusStatLogger exists only while its AsyncLLM logs
stats (vllm/v1/engine/async_llm.py): no request metric is measured, per token or per request. A server
over a provided `Llm` has no such flag and always records them.

Our own metrics (health, readiness, HTTP requests) carry our own prefix, `vllm_frontend:`, and are always
there (as vLLM's HTTP instrumentator's are).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from vllm_llm import GenerateStream
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest, LlmInfo, RequestTimings

if TYPE_CHECKING:
    from vllm_llm import EngineCoreLlm

#: The `engine` label value of request metrics on a server over a provided Llm (see the docstring).
FRONTEND_ENGINE_LABEL = "frontend"
#: Our own metrics' prefix.
OWN_PREFIX = "vllm_frontend:"

# vLLM 0.32's default bucket families (vllm/v1/metrics/buckets.py).
REQUEST_LATENCY_BUCKETS = (
    *(0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0),
    *(120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0),
)
TIME_TO_FIRST_TOKEN_BUCKETS = (
    *(0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
    *(20.0, 40.0, 80.0, 160.0, 640.0, 2560.0),
)
INTER_TOKEN_LATENCY_BUCKETS = (
    *(0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0),
    *(20.0, 40.0, 80.0),
)
ITERATION_TOKENS_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
REQUEST_PARAMS_N_BUCKETS = (1, 2, 5, 10, 20)
REQUEST_NUM_PREEMPTIONS_BUCKETS = (1, 2, 3, 4, 5, 10, 20)

#: vLLM's FinishReason strings: the `finished_reason` label values, all present from the start.
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
#: vLLM's PromptTokenStats.ALL_SOURCES and CacheHitSource values.
PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
CACHE_HIT_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
#: vLLM's `num_requests_waiting_by_reason` reasons and `engine_sleep_state` states.
WAITING_REASONS = ("capacity", "deferred")
SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's `request_tokens` family: 1-2-5 steps up to the model's length (build_1_2_5_buckets)."""
    buckets: list[float] = []
    scale = 1
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * scale
            if value > max_model_len:
                return tuple(buckets)
            buckets.append(value)
        scale *= 10


class RequestMetrics:
    """The metrics of one request: feed it deltas, then finish it once."""

    __slots__ = ("_first", "_last", "_m", "_owner", "_start", "_tokens", "done")

    def __init__(self, owner: Metrics, metrics: _RequestFamilies, prompt_tokens: int, n: int) -> None:
        self._owner = owner
        self._m = metrics
        self._start = self._last = time.perf_counter()
        self._first = True
        self._tokens = 0
        self.done = False
        owner.in_flight += 1
        metrics.prompt_tokens.inc(prompt_tokens)
        metrics.request_prompt_tokens.observe(prompt_tokens)
        metrics.params_n.observe(n)

    def tokens(self, n: int) -> None:
        """`n` new output tokens arrived now."""
        if n <= 0:
            return
        now = time.perf_counter()
        m = self._m
        if self._first:
            self._first = False
            m.ttft.observe(now - self._start)
        else:
            m.itl.observe(now - self._last)
        self._last = now
        self._tokens += n
        m.generation_tokens.inc(n)

    def finish(self, reason: str | None) -> None:
        """The request ended with `reason` (None: failed or cancelled, which vLLM does not count)."""
        if self.done:
            return
        self.done = True
        self._owner.in_flight -= 1
        if reason is None:
            return
        self._record_finish(reason)

    def _record_finish(self, reason: str) -> None:
        m = self._m
        m.e2e.observe(time.perf_counter() - self._start)
        m.request_generation_tokens.observe(self._tokens)
        m.max_num_generation_tokens.observe(self._tokens)
        # vLLM labels the engine's reason; the chat layer's "tool_calls" is the engine's "stop".
        m.success[reason if reason in m.success else "stop"].inc()


class _UnrecordedRequest(RequestMetrics):
    """A request on a server that records no request metrics (its engine logs no stats): counted in flight,
    nothing else."""

    __slots__ = ()

    def __init__(self, owner: Metrics) -> None:
        self._owner = owner
        self.done = False
        owner.in_flight += 1

    def tokens(self, n: int) -> None:
        """Nothing is recorded."""

    def _record_finish(self, reason: str) -> None:
        pass


class ServedRequest:
    """The metrics of a request a worker serves over gRPC (Generate, GenerateMux): a routed request counts
    on the worker that ran it. Feed it every output, then finish it once."""

    __slots__ = ("_reason", "_recorded")

    def __init__(self, metrics: Metrics | None, request: GenerateRequest) -> None:
        self._recorded = metrics.start(len(request.prompt_token_ids)) if metrics is not None else None
        self._reason: FinishReason | None = None

    def output(self, out: GenerateOutput) -> None:
        """One output went to the client."""
        if self._recorded is not None:
            self._recorded.tokens(len(out.token_ids))
        # An abort the engine did not finish (a client's, made here) is not a finished request to vLLM's
        # metrics; the engine's own aborts come with its timings.
        if out.finish_reason is not FinishReason.ABORT or out.timings is not None:
            self._reason = out.finish_reason

    def finish(self) -> None:
        """The request ended (its stream is closed)."""
        if self._recorded is not None:
            self._recorded.finish(finish_reason_name(self._reason))


class _RequestFamilies:
    """The request metrics' children of this server's one (model_name, engine) label set."""

    def __init__(
        self, r: CollectorRegistry, labels: list[str], values: list[str], max_model_len: int
    ) -> None:
        tokens = request_tokens_buckets(max_model_len)

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, labels, registry=r).labels(*values)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
            return Histogram(name, doc, labels, buckets=buckets, registry=r).labels(*values)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*labels, "finished_reason"],
            registry=r,
        )
        self.success = {reason: success.labels(*values, reason) for reason in FINISHED_REASONS}
        self.request_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", tokens
        )
        self.request_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", tokens
        )
        self.max_num_generation_tokens = histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        )
        self.params_n = histogram(
            "vllm:request_params_n", "Histogram of the n request parameter.", REQUEST_PARAMS_N_BUCKETS
        )
        self.params_max_tokens = histogram(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tokens
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TIME_TO_FIRST_TOKEN_BUCKETS,
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            INTER_TOKEN_LATENCY_BUCKETS,
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            INTER_TOKEN_LATENCY_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.queue = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.inference = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.prefill = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.decode = histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.num_preemptions = histogram(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            REQUEST_NUM_PREEMPTIONS_BUCKETS,
        )
        self.prefill_kv_computed = histogram(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            tokens,
        )

    def finished_in_engine(
        self, timings: RequestTimings, num_generation_tokens: int, max_tokens: int | None, computed: int
    ) -> None:
        """One engine request's FinishedRequestStats (vLLM's PrometheusStatLogger.record)."""
        self.queue.observe(timings.queued_time)
        self.prefill.observe(timings.prefill_time)
        self.inference.observe(timings.inference_time)
        self.decode.observe(timings.decode_time)
        self.num_preemptions.observe(timings.num_preemptions)
        self.prefill_kv_computed.observe(computed)
        # The token made by the prefill does not count (IterationStats.update_from_finished_request).
        tpot = timings.decode_time / (num_generation_tokens - 1) if num_generation_tokens > 1 else 0.0
        self.tpot.observe(tpot)
        if max_tokens:
            self.params_max_tokens.observe(max_tokens)


class Metrics:
    """The server's Prometheus registry."""

    def __init__(
        self, model_name: str, info: Callable[[], LlmInfo], *, engine: EngineCoreLlm | None = None
    ) -> None:
        #: The `model_name` label value; settled once the Llm's served name is known (ServerState).
        self.model_name = model_name
        self._info = info
        self._engine = engine
        #: Requests started and not finished (not exported: tests wait on it).
        self.in_flight = 0
        #: Whether request metrics are recorded: always over a provided Llm, only while the engine logs
        #: stats over an owned one (see the module docstring).
        self.records_requests = engine is None or engine.log_stats
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_requests = Counter(
            f"{OWN_PREFIX}http_requests",
            "HTTP requests by handler, method and status.",
            ["handler", "method", "status"],
            registry=r,
        )
        self.healthy = Gauge(f"{OWN_PREFIX}healthy", "1 while the Llm is alive.", ["model_name"], registry=r)
        self.ready = Gauge(
            f"{OWN_PREFIX}ready", "1 while the server takes new requests.", ["model_name"], registry=r
        )
        self._requests: _RequestFamilies | None = None
        self._iteration_tokens: dict[int, Any] = {}
        self._mm_cache: tuple[Any, Any] | None = None

    @property
    def engine_label(self) -> str:
        """The `engine` label value of the request metrics (see the module docstring)."""
        if self._engine is None:
            return FRONTEND_ENGINE_LABEL
        return str(self._engine.engine_indexes[0])

    def _families(self) -> _RequestFamilies:
        """The request metrics, made on first use: their buckets need the Llm's max_model_len."""
        families = self._requests
        if families is None:
            families = self._requests = self._build(self._info().max_model_len)
        return families

    def _build(self, max_model_len: int) -> _RequestFamilies:
        r = self.registry
        labels = ["model_name", "engine"]
        families = _RequestFamilies(r, labels, [self.model_name, self.engine_label], max_model_len)
        engine = self._engine
        if engine is not None and engine.log_stats:
            iteration = Histogram(
                "vllm:iteration_tokens_total",
                "Histogram of number of tokens per engine_step.",
                labels,
                buckets=ITERATION_TOKENS_BUCKETS,
                registry=r,
            )
            self._iteration_tokens = {
                i: iteration.labels(self.model_name, str(i)) for i in engine.engine_indexes
            }
            engine.set_iteration_observer(self._observe_iteration)
            queries = Counter(
                "vllm:mm_cache_queries",
                "Multi-modal cache queries, in terms of number of queried items.",
                labels,
                registry=r,
            )
            hits = Counter(
                "vllm:mm_cache_hits",
                "Multi-modal cache hits, in terms of number of cached items.",
                labels,
                registry=r,
            )
            first = str(engine.engine_indexes[0])
            self._mm_cache = (queries.labels(self.model_name, first), hits.labels(self.model_name, first))
            r.register(_EngineCollector(self, engine))
        return families

    def _observe_iteration(self, engine_index: int, tokens: int) -> None:
        histogram = self._iteration_tokens.get(engine_index)
        if histogram is not None:
            histogram.observe(tokens)

    def start(self, prompt_tokens: int, *, n: int = 1) -> RequestMetrics:
        """Start recording one request of `prompt_tokens` tokens asking for `n` choices."""
        if not self.records_requests:
            return _UnrecordedRequest(self)
        return RequestMetrics(self, self._families(), prompt_tokens, n)

    def tap(self, stream: GenerateStream, request: GenerateRequest) -> GenerateStream:
        """`stream` (of `request`) itself, recording the engine's timings of its final output as it is
        delivered (`GenerateStream.observe`: a stream read without a task, `listen` and `take`, records
        them too)."""
        if not self.records_requests:
            return stream
        return stream.observe(_EngineTimings(request, self._families()).observe)

    def gauge_samples(self, names: Mapping[str, str]) -> list[tuple[str, float]]:
        """The samples of the gauges `names` maps, in the registry's order, each under the name it maps to."""
        return [
            (names[family.name], float(sample.value))
            for family in self.registry.collect()
            if family.type == "gauge" and family.name in names
            for sample in family.samples
        ]

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        if self._requests is None and self.model_name and self.records_requests:
            with contextlib.suppress(Exception):  # the Llm has not started: no max_model_len yet
                self._families()
        mm = self._mm_cache
        if mm is not None and self._engine is not None:
            stats = self._engine.multimodal_cache_stats()
            if stats is not None:
                mm[0].inc(stats.total)
                mm[1].inc(stats.hits)
        return generate_latest(self.registry)


class _EngineTimings:
    """Follows an engine request's outputs; its final output's `timings` are recorded."""

    __slots__ = ("_computed", "_m", "_max_tokens", "_tokens")

    def __init__(self, request: GenerateRequest, metrics: _RequestFamilies) -> None:
        self._m = metrics
        self._max_tokens = request.sampling_params.max_tokens
        self._computed = len(request.prompt_token_ids)
        self._tokens = 0

    def observe(self, out: GenerateOutput) -> None:
        """One output of the request."""
        self._tokens += len(out.token_ids)
        info = out.prompt_info
        if info is not None:
            self._computed = info.num_prompt_tokens - max(info.num_cached_tokens or 0, 0)
        timings = out.timings
        if timings is not None and out.finish_reason is not None:
            self._m.finished_in_engine(timings, self._tokens, self._max_tokens, self._computed)


class _EngineCollector(Collector):
    """The engine's gauges and counters (vLLM's PrometheusStatLogger), read from the engine when scraped."""

    def __init__(self, metrics: Metrics, engine: EngineCoreLlm) -> None:
        self._m = metrics
        self._engine = engine

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        engine = self._engine
        name = self._m.model_name
        indexes = engine.engine_indexes
        scheduler = engine.scheduler_stats
        counters = engine.engine_counters()
        labels = ["model_name", "engine"]

        def gauge(metric: str, doc: str, value: Callable[[Any], float]) -> GaugeMetricFamily:
            family = GaugeMetricFamily(metric, doc, labels=labels)
            for i in indexes:
                s = scheduler.get(i)
                family.add_metric([name, str(i)], float(value(s)) if s is not None else 0.0)
            return family

        yield gauge(
            "vllm:num_requests_running",
            "Number of requests in model execution batches.",
            lambda s: s.num_running_reqs,
        )
        yield gauge(
            "vllm:num_requests_waiting",
            "Number of requests waiting to be processed.",
            lambda s: s.num_waiting_reqs + s.num_skipped_waiting_reqs,
        )
        by_reason = GaugeMetricFamily(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
            "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked "
            "status). Sum of all reasons equals vllm:num_requests_waiting.",
            labels=[*labels, "reason"],
        )
        for i in indexes:
            s = scheduler.get(i)
            by_reason.add_metric([name, str(i), "capacity"], float(s.num_waiting_reqs) if s else 0.0)
            by_reason.add_metric([name, str(i), "deferred"], float(s.num_skipped_waiting_reqs) if s else 0.0)
        yield by_reason
        sleeping, level = engine.sleep_state
        sleep = GaugeMetricFamily(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            labels=[*labels, "sleep_state"],
        )
        states = {"awake": not sleeping, "weights_offloaded": sleeping and level == 1}
        states["discard_all"] = sleeping and level == 2
        for i in indexes:
            for state in SLEEP_STATES:
                sleep.add_metric([name, str(i), state], float(states[state]))
        yield sleep
        yield gauge(
            "vllm:kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            lambda s: s.kv_cache_usage,
        )

        def counter(metric: str, doc: str, value: Callable[[Any], float]) -> CounterMetricFamily:
            family = CounterMetricFamily(metric, doc, labels=labels)
            for i in indexes:
                c = counters.get(i)
                family.add_metric([name, str(i)], float(value(c)) if c is not None else 0.0)
            return family

        yield counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
            lambda c: c.prefix_cache_queries,
        )
        yield counter(
            "vllm:prefix_cache_hits",
            "Prefix cache hits, in terms of number of cached tokens.",
            lambda c: c.prefix_cache_hits,
        )
        yield counter(
            "vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in terms of "
            "number of queried tokens.",
            lambda c: c.external_prefix_cache_queries,
        )
        yield counter(
            "vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms of "
            "number of cached tokens.",
            lambda c: c.external_prefix_cache_hits,
        )
        yield counter(
            "vllm:num_preemptions",
            "Cumulative number of preemption from the engine.",
            lambda c: c.num_preemptions,
        )
        if engine.counts_nans:
            yield counter(
                "vllm:corrupted_requests",
                "Corrupted requests, in terms of total number of requests with NaNs in logits.",
                lambda c: c.corrupted_requests,
            )
        by_source = CounterMetricFamily(
            "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", labels=[*labels, "source"]
        )
        for i in indexes:
            c = counters.get(i)
            for k, source in enumerate(PROMPT_SOURCES):
                by_source.add_metric(
                    [name, str(i), source], float(c.prompt_tokens_by_source[k]) if c else 0.0
                )
        yield by_source
        yield counter(
            "vllm:prompt_tokens_cached",
            "Number of cached prompt tokens (local + external).",
            lambda c: c.prompt_tokens_cached,
        )
        cached_by_source = CounterMetricFamily(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host "
            "(offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
            "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
            "vllm:external_prefix_cache_hits.",
            labels=[*labels, "source"],
        )
        for i in indexes:
            c = counters.get(i)
            tiers = c.prompt_tokens_cached_by_source if c is not None else {}
            for source in (*CACHE_HIT_SOURCES, *(t for t in tiers if t not in CACHE_HIT_SOURCES)):
                cached_by_source.add_metric([name, str(i), source], float(tiers.get(source, 0)))
        yield cached_by_source
        cache_config = engine.cache_config_info()
        if cache_config is not None:
            # An info metric as vLLM emulates it: a gauge set to 1, the config in its labels.
            info = GaugeMetricFamily(
                "vllm:cache_config_info",
                "Information of the LLMEngine CacheConfig",
                labels=[*cache_config, "engine"],
            )
            for i in indexes:
                info.add_metric([*cache_config.values(), str(i)], 1.0)
            yield info
        # vLLM's frontend admission counter: both reasons from the start, no `engine` label.
        rejections = CounterMetricFamily(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            labels=["model_name", "reason"],
        )
        for reason, count in engine.admission_rejections().items():
            rejections.add_metric([name, reason], float(count))
        yield rejections
        lora = engine.lora_requests_info()
        if lora is not None:
            max_lora, series = lora
            family = GaugeMetricFamily(
                "vllm:lora_requests_info",
                "Running stats on lora requests.",
                labels=["max_lora", "waiting_lora_adapters", "running_lora_adapters"],
            )
            for (waiting, running), seen in series.items():
                family.add_metric([str(max_lora), waiting, running], seen)
            yield family


def finish_reason_name(reason: FinishReason | None) -> str | None:
    """The `finished_reason` label of a wire finish reason (vLLM's FinishReason strings)."""
    return None if reason is None else FINISHED_REASONS[int(reason)]
