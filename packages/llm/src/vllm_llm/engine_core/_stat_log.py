"""vLLM's periodic stats log line for an EngineCoreLlm (imports vLLM; made only with stats on).

With stats on and its stat-logging logger at INFO, vLLM's AsyncLLM keeps one `LoggingStatLogger` per
engine (vllm/v1/metrics/loggers.py), feeds it every `EngineCoreOutputs`' scheduler stats, an
`IterationStats` of the batch and the multimodal cache's figures, and its API server calls `log()` every
``VLLM_LOG_STATS_INTERVAL`` seconds: ``Engine 000: Avg prompt throughput: 12.3 tokens/s, Avg generation
throughput: ..., Running: 1 reqs, Waiting: 0 reqs, CPU KV cache usage: 0.4%, Prefix cache hit rate:
...`` (at DEBUG while the engine idles). This feeds vLLM's own logger the same figures from
EngineCoreLlm's output loop, so the lines are vLLM's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from vllm import envs
from vllm.v1.metrics.loggers import LoggingStatLogger
from vllm.v1.metrics.stats import IterationStats, MultiModalCacheStats

#: The logger vLLM's LoggingStatLogger writes to.
STAT_LOGGER_NAME = "vllm.v1.metrics.loggers"


def stat_log_enabled() -> bool:
    """Whether vLLM would make its logging stat logger (its logger at INFO; StatLoggerManager)."""
    return logging.getLogger(STAT_LOGGER_NAME).isEnabledFor(logging.INFO)


def stat_log_interval() -> float:
    """Seconds between two logs: vLLM's ``VLLM_LOG_STATS_INTERVAL`` (10 unless set above 0)."""
    return float(envs.VLLM_LOG_STATS_INTERVAL)


def compute_nans() -> bool:
    """Whether the engine counts NaNs in logits (``VLLM_COMPUTE_NANS_IN_LOGITS``): then the log counts
    the requests that met one ("Corrupted: N reqs")."""
    return bool(envs.VLLM_COMPUTE_NANS_IN_LOGITS)


class StatLog:
    """One vLLM `LoggingStatLogger` per engine, fed once per `EngineCoreOutputs`."""

    def __init__(self, vllm_config: Any, engine_indexes: Sequence[int]) -> None:
        # vLLM's stat loggers are untyped: held as Any.
        self._loggers: dict[int, Any] = {
            i: LoggingStatLogger(vllm_config, engine_index=i) for i in engine_indexes
        }
        for logger in self._loggers.values():
            logger.log_engine_initialized()

    @staticmethod
    def iteration() -> Any:
        """An empty `IterationStats` for one batch of outputs (the caller fills what the log reads:
        prompt tokens computed, tokens generated, preemptions, corrupted requests)."""
        make: Any = IterationStats
        return make()

    def record(
        self,
        engine: int,
        scheduler_stats: Any,
        iteration: Any,
        mm_cache_stats: MultiModalCacheStats | None,
    ) -> None:
        """One `EngineCoreOutputs` of engine `engine` (AsyncLLM's output handler, its logging step); an
        engine this client does not manage is skipped, as vLLM's per-engine adapter skips it."""
        logger = self._loggers.get(engine)
        if logger is not None:
            logger.record(scheduler_stats, iteration, mm_cache_stats=mm_cache_stats, engine_idx=engine)

    def log(self) -> None:
        """Log every engine's line for the interval since the last call (AsyncLLM.do_log_stats)."""
        for logger in self._loggers.values():
            logger.log()
