"""`LlmInfo` from a running engine's configuration (vLLM applies the ready responses to it)."""

from __future__ import annotations

from typing import Any

from vllm_llm.engine_core._settings import EngineCoreSettings
from vllm_llm.wire import WIRE_REVISION, GenerationDefaults, LlmInfo, ModelDtype


def llm_info(settings: EngineCoreSettings, vllm_config: Any, tokenizer: Any) -> LlmInfo:
    """What a caller needs to know about the served model."""
    import vllm

    mc = vllm_config.model_config
    eos = tokenizer.eos_token_id
    gen_cfg = mc.try_get_generation_config() or {}
    gen_eos = gen_cfg.get("eos_token_id")
    all_eos = {gen_eos} if isinstance(gen_eos, int) else set(gen_eos or ())
    extra_eos = sorted(all_eos - {eos})
    diff = mc.get_diff_sampling_param()
    lora = vllm_config.lora_config
    return LlmInfo(
        model=settings.model,
        served_model_name=settings.served_model_name or settings.model,
        tokenizer=settings.tokenizer or settings.model,
        dtype=ModelDtype(str(mc.dtype).removeprefix("torch.")),
        max_model_len=mc.max_model_len,
        vocab_size=mc.get_vocab_size(),
        eos_token_id=eos,
        eos_token_ids=extra_eos or None,
        generation_defaults=GenerationDefaults(
            temperature=diff.get("temperature"),
            top_p=diff.get("top_p"),
            top_k=diff.get("top_k"),
            min_p=diff.get("min_p"),
            repetition_penalty=diff.get("repetition_penalty"),
            presence_penalty=diff.get("presence_penalty"),
            frequency_penalty=diff.get("frequency_penalty"),
            max_tokens=diff.get("max_tokens"),
        )
        if diff
        else None,
        data_parallel_size=vllm_config.parallel_config.data_parallel_size,
        vllm_version=vllm.__version__,
        wire_revision=WIRE_REVISION,
        supports_lora=lora is not None,
        max_loras=lora.max_loras if lora is not None else 0,
        supports_multimodal=bool(mc.is_multimodal_model),
        max_num_seqs=vllm_config.scheduler_config.max_num_seqs,
        max_num_batched_tokens=vllm_config.scheduler_config.max_num_batched_tokens,
        block_size=vllm_config.cache_config.block_size,
        num_kv_blocks=vllm_config.cache_config.num_gpu_blocks,
        reasoning_parser=settings.reasoning_parser,
        model_type=getattr(mc.hf_config, "model_type", None) or None,
        config_hash=_config_hash(vllm_config),
        tensor_parallel_size=vllm_config.parallel_config.tensor_parallel_size,
        pipeline_parallel_size=vllm_config.parallel_config.pipeline_parallel_size,
        enable_expert_parallel=bool(vllm_config.parallel_config.enable_expert_parallel),
    )


def _config_hash(vllm_config: Any) -> str | None:
    """The config's hash (vLLM's system_fingerprint takes its first 8 characters); None where vLLM's
    fingerprint says `nohash`."""
    try:
        return str(vllm_config.compute_hash())
    except Exception:
        return None
