"""Engine settings for the tiny model, as every engine-backed test uses them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vllm_llm import EngineCoreSettings

TINY_MAX_MODEL_LEN = 512


def tiny_engine_settings(model_dir: Path, **overrides: Any) -> EngineCoreSettings:
    """Engine settings for the tiny model, as every engine-backed test uses them."""
    from vllm_llm import EngineCoreSettings

    base: dict[str, Any] = {
        "model": str(model_dir),
        "served_model_name": "tiny",
        "dtype": "float32",
        "max_model_len": TINY_MAX_MODEL_LEN,
        "enable_lora": True,
        "max_lora_rank": 8,
        "max_loras": 2,
        "enable_prompt_embeds": True,
    }
    return EngineCoreSettings(**(base | overrides))
