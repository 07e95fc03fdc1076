"""Turn vLLM's `EngineCoreOutput` into wire `GenerateOutput`s (imports vLLM's output types lazily)."""

from __future__ import annotations

from typing import Any

from vllm_llm._pacing import StreamPacer
from vllm_llm.wire import FinishReason, GenerateOutput, LogprobRow, PromptInfo


def logprob_rows(token_ids: Any, logprobs: Any, ranks: Any) -> list[LogprobRow]:
    """Rows from vLLM's logprob arrays (numpy or torch): sampled/prompt token first, then the top-k."""
    ids = token_ids.tolist()
    lps = logprobs.tolist()
    rks = ranks.tolist()
    return [LogprobRow(token_ids=i, logprobs=lp, rank=r) for i, lp, r in zip(ids, lps, rks, strict=True)]


class RequestState:
    """What EngineCoreLlm keeps per in-flight request to build its outputs."""

    __slots__ = ("external_id", "num_cached_tokens", "pacer", "prompt_len", "prompt_logprobs", "started")

    def __init__(self, external_id: str, prompt_len: int, stream_interval: int = 1) -> None:
        self.external_id = external_id
        self.prompt_len = prompt_len
        self.pacer = StreamPacer(stream_interval)
        self.started = False
        self.prompt_logprobs: list[LogprobRow] | None = None
        self.num_cached_tokens = 0

    def convert(self, o: Any) -> GenerateOutput | None:
        """The output to send for one EngineCoreOutput; None when it only carried a chunk of prompt
        logprobs, or while the stream interval holds it."""
        if o.prefill_stats is not None:
            self.num_cached_tokens = o.prefill_stats.num_cached_tokens
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
        if not self.started:
            self.started = True
            out.prompt_info = PromptInfo(
                num_prompt_tokens=self.prompt_len,
                num_cached_tokens=self.num_cached_tokens,
                prompt_logprobs=self.prompt_logprobs,
            )
        return self.pacer.pace(out)
