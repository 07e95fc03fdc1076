"""What EngineCoreLlm learns from the engine's stats (with `log_stats`): per-engine counters, the latest
scheduler stats, the LoRA adapters in use and a hook for per-iteration numbers.

vLLM's frontend (AsyncLLM's output handler, `IterationStats`, `LoRARequestStates`) computes these from
the same `EngineCoreOutputs`; this keeps the figures its Prometheus logger exposes, without Prometheus
(the server owns the registry and reads them when scraped).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: vLLM's ``source`` label values of ``vllm:prompt_tokens_by_source`` (PromptTokenStats.ALL_SOURCES).
PROMPT_TOKEN_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")

#: Called once per `EngineCoreOutputs` that carried outputs: (engine index, tokens of the iteration,
#: i.e. prompt tokens computed plus tokens generated — vLLM's `vllm:iteration_tokens_total`).
IterationObserver = Callable[[int, int], None]


@dataclass
class EngineCounters:
    """Counters of one engine since start (vLLM's Prometheus counters of the same names)."""

    #: vllm:prefix_cache_queries / vllm:prefix_cache_hits (tokens).
    prefix_cache_queries: int = 0
    prefix_cache_hits: int = 0
    #: vllm:external_prefix_cache_queries / _hits (a KV connector's cache).
    external_prefix_cache_queries: int = 0
    external_prefix_cache_hits: int = 0
    #: vllm:prompt_tokens_by_source, in PROMPT_TOKEN_SOURCES order.
    prompt_tokens_by_source: list[int] = field(default_factory=lambda: [0, 0, 0])
    #: vllm:prompt_tokens_cached (local + external).
    prompt_tokens_cached: int = 0
    #: vllm:prompt_tokens_cached_by_source: cache tier (vLLM's CacheHitSource value) -> tokens.
    prompt_tokens_cached_by_source: dict[str, int] = field(default_factory=dict)
    #: vllm:num_preemptions.
    num_preemptions: int = 0
    #: vllm:corrupted_requests: finished requests whose logits held a NaN at some step (counted only
    #: while the engine counts them, ``VLLM_COMPUTE_NANS_IN_LOGITS``).
    corrupted_requests: int = 0


class EngineStats:
    """The stats state of an EngineCoreLlm; fed by its output loop only while stats are on."""

    def __init__(self, *, max_loras: int | None = None) -> None:
        #: The engine's LoRA slots (vLLM's ``max_lora`` label); None without LoRA (no LoRA tracking).
        self.max_loras = max_loras
        self.counters: dict[int, EngineCounters] = {}
        self.scheduler: dict[int, Any] = {}
        self.iteration_observer: IterationObserver | None = None
        self._track_loras = max_loras is not None
        #: LoRA name -> (waiting request ids, running request ids), as vLLM's LoRARequestStates.
        self._loras: dict[str, tuple[set[str], set[str]]] = {}
        #: vllm:lora_requests_info series: (waiting names, running names) -> time last seen.
        self.lora_info: dict[tuple[str, str], float] = {}

    def engine(self, index: int) -> EngineCounters:
        """The counters of engine `index` (made on first use)."""
        counters = self.counters.get(index)
        if counters is None:
            counters = self.counters[index] = EngineCounters()
        return counters

    def scheduler_stats(self, index: int, stats: Any) -> None:
        """Take one engine's SchedulerStats (vLLM's PrometheusStatLogger.record, scheduler part)."""
        self.scheduler[index] = stats
        c = self.engine(index)
        prefix = stats.prefix_cache_stats
        c.prefix_cache_queries += prefix.queries
        c.prefix_cache_hits += prefix.hits
        by_source = c.prompt_tokens_cached_by_source
        by_source["device"] = by_source.get("device", 0) + prefix.hits
        connector = stats.connector_prefix_cache_stats
        if connector is not None:
            c.external_prefix_cache_queries += connector.queries
            c.external_prefix_cache_hits += connector.hits
            for tier, tokens in connector.hits_by_source.items():
                key = str(getattr(tier, "value", tier))
                by_source[key] = by_source.get(key, 0) + tokens
        if self._track_loras:
            names = ",".join(self._loras)
            self.lora_info[(names, names)] = time.time()

    def prefill(self, index: int, prefill: Any) -> None:
        """Take a request's PrefillStats (vLLM's PromptTokenStats.update_from_output)."""
        c = self.engine(index)
        by_source = c.prompt_tokens_by_source
        by_source[0] += prefill.num_computed_tokens
        by_source[1] += prefill.num_local_cached_tokens
        by_source[2] += prefill.num_external_cached_tokens
        c.prompt_tokens_cached += prefill.num_cached_tokens

    def lora_events(self, request_id: str, lora_name: str, events: Any) -> None:
        """Move a LoRA request between waiting and running on its QUEUED / SCHEDULED / PREEMPTED events."""
        if not self._track_loras:
            return
        for event in events:
            kind = int(event.type)
            waiting, running = self._loras.setdefault(lora_name, (set(), set()))
            if kind == 2:  # SCHEDULED
                waiting.discard(request_id)
                running.add(request_id)
            else:  # QUEUED, PREEMPTED
                running.discard(request_id)
                waiting.add(request_id)

    def lora_finished(self, request_id: str, lora_name: str) -> None:
        """A LoRA request ended."""
        sets = self._loras.get(lora_name)
        if sets is None:
            return
        sets[0].discard(request_id)
        sets[1].discard(request_id)
        if not sets[0] and not sets[1]:
            del self._loras[lora_name]
