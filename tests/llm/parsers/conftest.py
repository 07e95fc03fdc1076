from __future__ import annotations

from pathlib import Path

import pytest

from tests.llm.parsers.parity import Vllm
from vllm_llm.text._tokenizer import TextTokenizer


@pytest.fixture(scope="session")
def vllm_parsers(tiny_model_dir: Path) -> Vllm:
    """vLLM's parsers (the oracle) over the tiny model's tokenizer."""
    return Vllm(tiny_model_dir)


@pytest.fixture(scope="session")
def tokenizer(tiny_model_dir: Path) -> TextTokenizer:
    return TextTokenizer.from_dir(tiny_model_dir)
