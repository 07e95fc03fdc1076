"""The body of `POST /inference/v1/generate` (vLLM's tokens-in / tokens-out GenerateRequest)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from vllm_llm import TextRequest, TextSamplingParams
from vllm_llm.wire import LoraRequest, RepetitionDetection
from vllm_server.errors import BadRequest
from vllm_server.http.openai.sampling import StreamOptions, StructuredOutputsParams, structured_outputs

__all__ = ["GenerateBody", "GenerateSamplingParams"]


class GenerateSamplingParams(msgspec.Struct, kw_only=True):
    """vLLM's user-level SamplingParams as JSON; an absent max_tokens is the server's default (room left)."""

    n: int = 1
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    max_tokens: int | None = None
    min_tokens: int = 0
    logprobs: int | None = None
    prompt_logprobs: int | None = None
    detokenize: bool = True
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    structured_outputs: StructuredOutputsParams | None = None
    logit_bias: dict[int, float] | None = None
    allowed_token_ids: list[int] | None = None
    extra_args: dict[str, Any] | None = None
    bad_words: list[str] | None = None
    repetition_detection: RepetitionDetection | None = None
    stream_interval: int | None = None

    @property
    def stop_strings(self) -> list[str]:
        """`stop` as a list."""
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or ())

    def text_params(self) -> TextSamplingParams:
        """The same parameters for the text layer."""
        return TextSamplingParams(
            n=self.n,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            seed=self.seed,
            max_tokens=self.max_tokens,
            min_tokens=self.min_tokens,
            stop=self.stop_strings,
            stop_token_ids=list(self.stop_token_ids or ()),
            ignore_eos=self.ignore_eos,
            include_stop_str_in_output=self.include_stop_str_in_output,
            skip_special_tokens=self.skip_special_tokens,
            spaces_between_special_tokens=self.spaces_between_special_tokens,
            logprobs=self.logprobs,
            prompt_logprobs=self.prompt_logprobs,
            logit_bias=self.logit_bias,
            allowed_token_ids=self.allowed_token_ids,
            bad_words=list(self.bad_words or ()),
            structured_outputs=structured_outputs(self.structured_outputs, None),
            repetition_detection=self.repetition_detection,
            extra_args=self.extra_args,
            stream_interval=self.stream_interval,
        )


class GenerateBody(msgspec.Struct, kw_only=True):
    """vLLM's GenerateRequest (multimodal features are not supported)."""

    token_ids: list[int]
    sampling_params: GenerateSamplingParams
    request_id: str | None = None
    model: str | None = None
    return_token_ids: bool | None = None
    output_mode: Literal["tokens", "text"] = "tokens"
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    cache_salt: str | None = None
    priority: int = 0
    kv_transfer_params: dict[str, Any] | None = None
    features: dict[str, Any] | None = None
    content_parts: list[dict[str, Any]] | None = None

    def check(self) -> None:
        """vLLM's validators of this request."""
        if not self.token_ids:
            raise BadRequest("token_ids must contain at least one token id", param="token_ids")
        if any(t < 0 for t in self.token_ids):
            raise BadRequest("token_ids must not contain negative values", param="token_ids")
        if self.features or self.content_parts:
            raise BadRequest("multimodal inputs are not supported by this server", param="features")
        sp = self.sampling_params
        if not sp.detokenize and sp.stop_strings:
            raise BadRequest(
                "stop strings are only supported when detokenize is True. Set detokenize=True to use stop.",
                param="sampling_params.stop",
            )
        if self.output_mode != "tokens" and not sp.detokenize:
            raise BadRequest(
                f"output_mode={self.output_mode!r} requires sampling_params.detokenize to be true",
                param="output_mode",
            )

    @property
    def raw_tokens_suffice(self) -> bool:
        """Whether the engine's raw outputs answer this request (no detokenizing layer needed)."""
        sp = self.sampling_params
        return (
            self.output_mode == "tokens" and sp.n == 1 and not sp.stop_strings and sp.prompt_logprobs is None
        )

    def text_request(self, request_id: str, lora_request: LoraRequest | None) -> TextRequest:
        """The text-layer request (token prompt)."""
        return TextRequest(
            request_id=request_id,
            prompt=list(self.token_ids),
            params=self.sampling_params.text_params(),
            lora_request=lora_request,
            cache_salt=self.cache_salt,
            priority=self.priority,
            kv_transfer_params=self.kv_transfer_params,
        )
