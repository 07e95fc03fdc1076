"""Lower a wire `GenerateRequest` to vLLM's `EngineCoreRequest` (imports vLLM; used by EngineCoreLlm).

Every field survives: the sampling parameters become a real, validated `vllm.SamplingParams`, with the
private lowered fields (`_eos_token_id`, `_all_stop_token_ids`, `_bad_words_token_ids`) and the
structured-output backend (resolved by `SamplingParams.verify` as vLLM's InputProcessor does).

The checks vLLM's InputProcessor makes of a request's sampling parameters against the engine's config
(`_validate_params`) are made here, in its words: the custom logits processors' own `validate_params`
(`--logits-processors`), and the bounds of sampling distribution replay (`--return-sampling-mask`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

import vllm
from vllm.config import VllmConfig
from vllm.exceptions import VLLMValidationError
from vllm.lora.request import LoRARequest
from vllm.sampling_params import RepetitionDetectionParams, RequestOutputKind, StructuredOutputsParams
from vllm.v1.engine import EngineCoreRequest
from vllm.v1.kv_hints.protocol import KvHintAction, KvHintsEnvelope

from vllm_llm._errors import InvalidRequest, PromptTooLong, Unsupported
from vllm_llm.engine_core._multimodal import MultiModalLowering
from vllm_llm.wire import GenerateRequest, KvHints, LoraRequest, SamplingParams, StructuredOutputs, Tensor


class Lowering:
    """Turns wire requests into engine-core requests for one engine configuration."""

    def __init__(self, vllm_config: VllmConfig, tokenizer: Any) -> None:
        self._config = vllm_config
        self._tokenizer = tokenizer
        self._model = vllm_config.model_config
        self._vocab_size = self._model.get_vocab_size()
        self._dp_size = vllm_config.parallel_config.data_parallel_size
        self._lora = vllm_config.lora_config is not None
        self._validate_logits_processors = _logits_processors_validator(vllm_config)
        self.multimodal = MultiModalLowering(vllm_config)

    def lower(self, request: GenerateRequest, internal_id: str) -> EngineCoreRequest:
        """The EngineCoreRequest for `request`, to be sent under `internal_id`."""
        self._validate(request)
        sampling_params = self._sampling_params(request)
        lora = self.lora_request(request.lora_request)
        return EngineCoreRequest(
            request_id=internal_id,
            prompt_token_ids=list(request.prompt_token_ids),
            mm_features=self.multimodal.lower(request.mm_features, lora) if request.mm_features else None,
            sampling_params=sampling_params,
            pooling_params=None,
            arrival_time=request.arrival_time if request.arrival_time is not None else time.time(),
            lora_request=lora,
            cache_salt=request.cache_salt,
            data_parallel_rank=request.data_parallel_rank,
            prompt_embeds=self._prompt_embeds(request.prompt_embeds),
            priority=request.priority,
            trace_headers=dict(request.trace_headers) if request.trace_headers is not None else None,
            resumable=request.resumable,
            external_req_id=request.request_id,
            reasoning_ended=request.reasoning_ended,
            reasoning_parser_kwargs=request.reasoning_parser_kwargs,
            abort_immediately=request.abort_immediately,
            session_id=request.session_id,
            kv_hints=_kv_hints(request.kv_hints),
        )

    # ---- validation -------------------------------------------------------------------------------

    def _validate(self, request: GenerateRequest) -> None:
        prompt = request.prompt_token_ids
        if not prompt:
            raise InvalidRequest(
                f"request {request.request_id!r} has an empty prompt", param="prompt_token_ids"
            )
        vocab = self._vocab_size
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise InvalidRequest(f"prompt token ids must be in [0, {vocab})", param="prompt_token_ids")
        max_len = self._model.max_model_len
        if len(prompt) >= max_len:
            raise PromptTooLong(max_model_len=max_len, prompt_len=len(prompt))
        rank = request.data_parallel_rank
        if rank is not None and not 0 <= rank < self._dp_size:
            raise InvalidRequest(
                f"data_parallel_rank {rank} is out of range [0, {self._dp_size})", param="data_parallel_rank"
            )
        if request.mm_features:
            self.multimodal.check(request.mm_features, len(prompt))
        if request.prompt_embeds is not None and not self._model.enable_prompt_embeds:
            raise Unsupported("prompt embeddings need an engine started with prompt embeddings enabled")
        if request.lora_request is not None and not self._lora:
            raise InvalidRequest("LoRA is not enabled on this engine", param="lora_request")

    # ---- sampling parameters ----------------------------------------------------------------------

    def _sampling_params(self, request: GenerateRequest) -> vllm.SamplingParams:
        wp = request.sampling_params
        extra_args = dict(wp.extra_args) if wp.extra_args is not None else None
        for key, value in (
            ("kv_transfer_params", request.kv_transfer_params),
            ("ec_transfer_params", request.ec_transfer_params),
        ):
            if value is not None:
                extra_args = {**(extra_args or {}), key: value}
        max_tokens = wp.max_tokens
        if max_tokens is None:
            max_tokens = self._model.max_model_len - len(request.prompt_token_ids)
        try:
            sp = vllm.SamplingParams(
                n=1,
                temperature=wp.temperature,
                top_p=wp.top_p,
                top_k=wp.top_k,
                min_p=wp.min_p,
                seed=wp.seed,
                presence_penalty=wp.presence_penalty,
                frequency_penalty=wp.frequency_penalty,
                repetition_penalty=wp.repetition_penalty,
                max_tokens=max_tokens,
                min_tokens=wp.min_tokens,
                ignore_eos=wp.ignore_eos,
                stop_token_ids=list(wp.stop_token_ids) if wp.stop_token_ids is not None else None,
                logprobs=wp.logprobs,
                prompt_logprobs=wp.prompt_logprobs,
                logprob_token_ids=list(wp.logprob_token_ids) if wp.logprob_token_ids is not None else None,
                logit_bias=dict(wp.logit_bias) if wp.logit_bias is not None else None,
                allowed_token_ids=list(wp.allowed_token_ids) if wp.allowed_token_ids is not None else None,
                structured_outputs=_structured_outputs(wp.structured_outputs),
                repetition_detection=_repetition_detection(wp),
                thinking_token_budget=wp.thinking_token_budget,
                skip_reading_prefix_cache=wp.skip_reading_prefix_cache,
                extra_args=extra_args,
                stream_interval=wp.stream_interval,
                output_kind=RequestOutputKind.DELTA,
                detokenize=False,
            )
            sp.verify(
                self._model,
                self._config.speculative_config,
                self._config.structured_outputs_config,
                self._tokenizer,
            )
            self._validate_logits_processors(sp)
            if self._model.return_sampling_mask:
                _check_sampling_mask_bounds(sp)
        except VLLMValidationError as exc:
            raise InvalidRequest(str(exc), param=exc.parameter) from exc
        except (ValueError, TypeError) as exc:
            raise InvalidRequest(str(exc)) from exc
        _apply_private_fields(sp, wp)
        return sp

    # ---- other fields -----------------------------------------------------------------------------

    @staticmethod
    def lora_request(lora: LoraRequest | None) -> LoRARequest | None:
        """vLLM's LoRARequest for a wire one."""
        if lora is None:
            return None
        try:
            return LoRARequest(
                lora_name=lora.lora_name,
                lora_int_id=lora.lora_int_id,
                lora_path=lora.lora_path,
                base_model_name=lora.base_model_name,
                load_inplace=lora.load_inplace,
                is_3d_lora_weight=lora.is_3d_lora_weight,
            )
        except (ValueError, AssertionError) as exc:
            raise InvalidRequest(f"bad lora_request: {exc}", param="lora_request") from exc

    @staticmethod
    def _prompt_embeds(embeds: Tensor | None) -> Any:
        if embeds is None:
            return None
        import torch

        from vllm_llm.engine_core._tensors import to_torch

        tensor = to_torch(embeds)
        if tensor.dim() != 2 or not tensor.is_floating_point():
            raise InvalidRequest("prompt_embeds must be a 2-D floating-point tensor", param="prompt_embeds")
        return tensor.to(torch.get_default_dtype()) if tensor.dtype == torch.float64 else tensor


def _logits_processors_validator(config: VllmConfig) -> Callable[[vllm.SamplingParams], None]:
    """The per-request check of the engine's custom logits processors (their `validate_params`), loaded
    as vLLM's InputProcessor loads them for the model runner the engine uses."""
    custom = config.model_config.logits_processors
    if config.use_v2_model_runner:
        from vllm.v1.worker.gpu.sample import logits_processor

        validator: Callable[[vllm.SamplingParams], None]
        validator = logits_processor.build_custom_logits_processors_params_validator(custom)
        return validator
    from vllm.v1.sample.logits_processor import validate_logits_processors_parameters

    return partial(validate_logits_processors_parameters, custom)


def _check_sampling_mask_bounds(sp: vllm.SamplingParams) -> None:
    """An engine returning each token's sampling mask (`--return-sampling-mask`) samples, within top-k:
    vLLM's InputProcessor refuses anything else with these ValueErrors."""
    if sp.temperature <= 0:
        raise ValueError("sampling distribution replay requires temperature > 0")
    if sp.top_k <= 0:
        raise ValueError(
            "sampling distribution replay requires top_k > 0 to bound sampling mask size, reduce transfer "
            "overhead, and avoid potential OOMs"
        )


def _apply_private_fields(sp: vllm.SamplingParams, wp: SamplingParams) -> None:
    """The lowered private fields, as the caller computed them (vLLM's update_from_* results)."""
    sp._eos_token_id = wp.eos_token_id
    sp._all_stop_token_ids = set(sp.stop_token_ids or ()) | set(wp.all_stop_token_ids or ())
    if wp.bad_words_token_ids is not None:
        sp._bad_words_token_ids = [list(ids) for ids in wp.bad_words_token_ids]


def _structured_outputs(so: StructuredOutputs | None) -> StructuredOutputsParams | None:
    if so is None:
        return None
    params = StructuredOutputsParams(
        json=so.json,
        regex=so.regex,
        choice=list(so.choice) if so.choice is not None else None,
        grammar=so.grammar,
        json_object=so.json_object,
        disable_any_whitespace=so.disable_any_whitespace,
        disable_additional_properties=so.disable_additional_properties,
        whitespace_pattern=so.whitespace_pattern,
        structural_tag=so.structural_tag,
    )
    if so.backend is not None:
        # verify() keeps a backend that matches the engine's (or that `auto` chose) and rejects others.
        params._backend = so.backend.value
        params._backend_was_auto = so.backend_was_auto
    return params


def _repetition_detection(wp: SamplingParams) -> RepetitionDetectionParams | None:
    rd = wp.repetition_detection
    if rd is None:
        return None
    return RepetitionDetectionParams(
        max_pattern_size=rd.max_pattern_size, min_pattern_size=rd.min_pattern_size, min_count=rd.min_count
    )


def _kv_hints(hints: KvHints | None) -> KvHintsEnvelope | None:
    if hints is None:
        return None
    return KvHintsEnvelope(
        protocol_version=hints.protocol_version,
        message_id=hints.message_id,
        actions=[
            KvHintAction(
                action_id=a.action_id,
                action_type=a.action_type,
                action_version=a.action_version,
                payload=dict(a.payload),
            )
            for a in hints.actions
        ],
    )
