"""Turn vLLM's `EngineCoreOutput` into wire `GenerateOutput`s (imports vLLM's output types lazily)."""

from __future__ import annotations

from typing import Any

from vllm_llm._pacing import StreamPacer
from vllm_llm.wire import FinishReason, GenerateOutput, LogprobRow, PromptInfo, RequestTimings

#: vLLM's EngineCoreEventType values (QUEUED, SCHEDULED, PREEMPTED).
_QUEUED, _SCHEDULED, _PREEMPTED = 1, 2, 3


def logprob_rows(token_ids: Any, logprobs: Any, ranks: Any) -> list[LogprobRow]:
    """Rows from vLLM's logprob arrays (numpy or torch): sampled/prompt token first, then the top-k."""
    ids = token_ids.tolist()
    lps = logprobs.tolist()
    rks = ranks.tolist()
    return [LogprobRow(token_ids=i, logprobs=lp, rank=r) for i, lp, r in zip(ids, lps, rks, strict=True)]


class RequestClock:
    """A request's engine-core timestamps, kept as vLLM's RequestStateStats keeps them (stats on only).

    Timestamps are the engine core's monotonic clock: the QUEUED / SCHEDULED / PREEMPTED events of the
    request, and the `EngineCoreOutputs.timestamp` of the batches that carried its outputs.
    """

    __slots__ = (
        "corrupted",
        "first_token_ts",
        "last_token_ts",
        "num_preemptions",
        "queued_ts",
        "scheduled_ts",
        "seen",
    )

    def __init__(self) -> None:
        #: An output of the request met NaNs in its logits (counted only with VLLM_COMPUTE_NANS_IN_LOGITS).
        self.corrupted = False
        self.queued_ts = 0.0
        self.scheduled_ts = 0.0
        self.first_token_ts = 0.0
        self.last_token_ts = 0.0
        self.num_preemptions = 0
        self.seen = False

    def update(self, o: Any, timestamp: float) -> int:
        """Take one EngineCoreOutput stamped `timestamp`; the number of preemptions it reported."""
        preempted = 0
        events = o.events
        if events:
            for event in events:
                kind = int(event.type)
                if kind == _QUEUED:
                    self.queued_ts = event.timestamp
                elif kind == _SCHEDULED:
                    if self.scheduled_ts == 0.0:  # a preempted request's rescheduling does not count
                        self.scheduled_ts = event.timestamp
                elif kind == _PREEMPTED:
                    preempted += 1
        self.num_preemptions += preempted
        if not self.seen:  # vLLM's first output ends the prefill, whatever it carries
            self.seen = True
            self.first_token_ts = timestamp
        self.last_token_ts = timestamp
        return preempted

    def timings(self) -> RequestTimings:
        """vLLM's FinishedRequestStats intervals (IterationStats.update_from_finished_request)."""
        return RequestTimings(
            queued_time=self.scheduled_ts - self.queued_ts,
            prefill_time=self.first_token_ts - self.scheduled_ts,
            decode_time=self.last_token_ts - self.first_token_ts,
            inference_time=self.last_token_ts - self.scheduled_ts,
            num_preemptions=self.num_preemptions,
        )


class RequestState:
    """What EngineCoreLlm keeps per in-flight request to build its outputs."""

    __slots__ = (
        "clock",
        "external_id",
        "lora_name",
        "num_cache_creation_tokens",
        "num_cached_tokens",
        "pacer",
        "prefilling",
        "prompt_len",
        "prompt_logprobs",
        "started",
    )

    def __init__(
        self,
        external_id: str,
        prompt_len: int,
        stream_interval: int = 1,
        *,
        log_stats: bool = False,
        lora_name: str | None = None,
    ) -> None:
        self.external_id = external_id
        self.prompt_len = prompt_len
        #: No output from the engine yet (vLLM's RequestState.is_prefilling): its prompt is queued.
        self.prefilling = True
        self.pacer = StreamPacer(stream_interval)
        self.started = False
        self.prompt_logprobs: list[LogprobRow] | None = None
        self.num_cached_tokens = 0
        self.num_cache_creation_tokens = 0
        #: The engine-core timestamps, only while the engine logs stats.
        self.clock: RequestClock | None = RequestClock() if log_stats else None
        self.lora_name = lora_name

    def convert(self, o: Any) -> GenerateOutput | None:
        """The output to send for one EngineCoreOutput; None when it only carried a chunk of prompt
        logprobs, or while the stream interval holds it. (The caller updates `clock` first.)"""
        self.prefilling = False
        if o.prefill_stats is not None:
            self.num_cached_tokens = o.prefill_stats.num_cached_tokens
            self.num_cache_creation_tokens = o.prefill_stats.num_cache_creation_tokens
        plp = o.new_prompt_logprobs_tensors
        if plp is not None:
            rows = logprob_rows(plp.logprob_token_ids, plp.logprobs, plp.selected_token_ranks)
            self.prompt_logprobs = rows if self.prompt_logprobs is None else [*self.prompt_logprobs, *rows]
        finish = o.finish_reason
        if not o.new_token_ids and finish is None and o.kv_transfer_params is None:
            return None
        lp = o.new_logprobs
        out = GenerateOutput(
            request_id=self.external_id,
            token_ids=o.new_token_ids,
            logprobs=logprob_rows(lp.logprob_token_ids, lp.logprobs, lp.sampled_token_ranks)
            if lp is not None
            else None,
            finish_reason=FinishReason(int(finish)) if finish is not None else None,
            stop_reason=o.stop_reason if finish is not None else None,
            kv_transfer_params=o.kv_transfer_params,
            ec_transfer_params=o.ec_transfer_params,
        )
        if finish is not None and self.clock is not None:
            out.timings = self.clock.timings()
        if not self.started:
            self.started = True
            out.prompt_info = PromptInfo(
                num_prompt_tokens=self.prompt_len,
                num_cached_tokens=self.num_cached_tokens,
                num_cache_creation_tokens=self.num_cache_creation_tokens,
                prompt_logprobs=self.prompt_logprobs,
            )
        return self.pacer.pace(out)
