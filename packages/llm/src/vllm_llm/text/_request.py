"""`TextRequest` and its `TextSamplingParams`: what a caller of the text layer asks for.

Their own module because both the text layer and its lowering (`text._lowering`) read them.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from vllm_llm.wire import LoraRequest, MultiModalFeature, RepetitionDetection, StructuredOutputs

__all__ = ["TextRequest", "TextSamplingParams"]


class TextSamplingParams(msgspec.Struct, kw_only=True):
    """User-facing sampling parameters; None means the generation-config default, then vLLM's."""

    n: int = 1
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    """None: the generation config's max_new_tokens, at most what fits in max_model_len."""
    min_tokens: int = 0
    stop: list[str] = []
    stop_token_ids: list[int] = []
    ignore_eos: bool = False
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    logprobs: int | None = None
    """Top logprobs per output token (-1: the whole vocabulary)."""
    logprob_token_ids: list[int] | None = None
    """Token ids whose logprobs every output position reports (besides the sampled token's); when set,
    they replace the top-k (`logprobs` is then ignored, as vLLM's OpenAI server does)."""
    prompt_logprobs: int | None = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] = []
    structured_outputs: StructuredOutputs | None = None
    repetition_detection: RepetitionDetection | None = None
    kv_transfer_params: dict[str, Any] | None = None
    extra_args: dict[str, Any] | None = None
    stream_interval: int | None = None
    thinking_token_budget: int | None = None
    """Reasoning tokens allowed before the engine ends reasoning (-1 or None: unlimited). Needs an engine
    with a reasoning parser (`LlmInfo.reasoning_parser`), else refused with vLLM's error."""
    """Stream every this many new tokens (first and last at once); None: the Llm's own interval."""


class TextRequest(msgspec.Struct, kw_only=True):
    """A text (or pre-tokenized) prompt with its sampling parameters and engine options."""

    request_id: str
    prompt: str | list[int]
    params: TextSamplingParams = msgspec.field(default_factory=TextSamplingParams)
    add_special_tokens: bool = True
    """Tokenize a text prompt with the tokenizer's special tokens (bos) added."""
    lora_request: LoraRequest | None = None
    cache_salt: str | None = None
    priority: int = 0
    data_parallel_rank: int | None = None
    trace_headers: dict[str, str] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    arrival_time: float | None = None
    mm_features: list[MultiModalFeature] | None = None
    """The prompt's processed media (their placeholders already expanded in the token prompt)."""
    reasoning_ended: bool | None = None
    """Whether the prompt already ended reasoning (None: the engine decides); see GenerateRequest."""
    reasoning_parser_kwargs: dict[str, Any] | None = None
    truncate_prompt_tokens: int | None = None
    """Keep only this many prompt tokens (-1: as many as the context takes), vLLM's truncation."""
    truncation_side: Literal["left", "right"] | None = None
    """Which end `truncate_prompt_tokens` cuts: left keeps the last tokens (None: left, vLLM's default
    for generation)."""
    session_id: str | None = None
    ec_transfer_params: dict[str, Any] | None = None
