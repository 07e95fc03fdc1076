"""A MockLlm that looks like the tiny model (its tokenizer, context length and eos ids)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vllm_llm import MockLlm
from vllm_llm.text import TextTokenizer
from vllm_llm.wire import WIRE_REVISION, GenerationDefaults, LlmInfo, ModelDtype

TINY_MAX_MODEL_LEN = 512


def tiny_info(model_dir: Path, **overrides: Any) -> LlmInfo:
    """The LlmInfo an engine over the tiny model reports."""
    tokenizer = TextTokenizer.from_dir(model_dir)
    gen: dict[str, Any] = json.loads((model_dir / "generation_config.json").read_text())
    eos = gen["eos_token_id"]
    fields: dict[str, Any] = {
        "model": str(model_dir),
        "served_model_name": "tiny",
        "tokenizer": str(model_dir),
        "dtype": ModelDtype.FLOAT32,
        "max_model_len": TINY_MAX_MODEL_LEN,
        "vocab_size": tokenizer.vocab_size,
        "eos_token_id": tokenizer.eos_token_id,
        "eos_token_ids": [
            e for e in (eos if isinstance(eos, list) else [eos]) if e != tokenizer.eos_token_id
        ],
        "generation_defaults": GenerationDefaults(
            **{k: gen.get(k) for k in ("temperature", "top_p", "top_k", "min_p", "repetition_penalty")}
        ),
        "wire_revision": WIRE_REVISION,
    }
    return LlmInfo(**(fields | overrides))


def tiny_mock(model_dir: Path, *, step_interval: float = 0.001, **info: Any) -> MockLlm:
    """A MockLlm with the tiny model's info."""
    return MockLlm(info=tiny_info(model_dir, **info), step_interval=step_interval)
