"""Session-wide fixtures shared by every test package."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny Llama model with its locally trained tokenizer (built once, cached on disk)."""
    from vllm_llm.tiny_model import build_tiny_model

    return build_tiny_model()
