"""`EngineCoreSettings`: what an engine core is built from (read by `EngineCoreLlm` and `_engine_info`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EngineCoreSettings"]


@dataclass(frozen=True, kw_only=True)
class EngineCoreSettings:
    """What an engine core is built from (a subset of vLLM's engine arguments, plus our own)."""

    model: str
    tokenizer: str | None = None
    served_model_name: str | None = None
    dtype: str = "auto"
    max_model_len: int | None = None
    data_parallel_size: int = 1
    seed: int = 0
    enforce_eager: bool = True
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    enable_lora: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    enable_sleep_mode: bool = False
    enable_prompt_embeds: bool = False
    structured_outputs_backend: str = "auto"
    #: Engine stats (scheduler stats for /metrics), on by default as in vLLM (`--disable-log-stats`).
    log_stats: bool = True
    randomize_request_ids: bool = True
    #: Send a request's outputs every this many new tokens (vLLM's `--stream-interval`); a request may
    #: ask for a larger interval (`SamplingParams.stream_interval`), never a smaller one.
    stream_interval: int = 1
    #: vLLM's `--reasoning-parser` for the engine: its reasoning config (thinking_token_budget) and the
    #: structured-output manager's start after reasoning. Parsing the output stays with the caller.
    reasoning_parser: str | None = None
    #: Further `vllm.engine.arg_utils.AsyncEngineArgs` fields, passed through.
    engine_args: dict[str, Any] = field(default_factory=dict)

    def async_engine_args(self) -> Any:
        """vLLM's AsyncEngineArgs for these settings."""
        from vllm.engine.arg_utils import AsyncEngineArgs

        kwargs: dict[str, Any] = {
            "model": self.model,
            "tokenizer": self.tokenizer,
            "served_model_name": self.served_model_name,
            "dtype": self.dtype,
            "max_model_len": self.max_model_len,
            "data_parallel_size": self.data_parallel_size,
            "seed": self.seed,
            "enforce_eager": self.enforce_eager,
            "enable_lora": self.enable_lora,
            "enable_sleep_mode": self.enable_sleep_mode,
            "enable_prompt_embeds": self.enable_prompt_embeds,
            "structured_outputs_config": {"backend": self.structured_outputs_backend},
            "reasoning_parser": self.reasoning_parser or "",
            "disable_log_stats": not self.log_stats,
            "stream_interval": self.stream_interval,
        }
        if self.enable_lora:
            kwargs |= {"max_loras": self.max_loras, "max_lora_rank": self.max_lora_rank}
        for name in ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching"):
            if getattr(self, name) is not None:
                kwargs[name] = getattr(self, name)
        return AsyncEngineArgs(**(kwargs | self.engine_args))
