"""Fixtures of the text/chat suite: the tiny model's LlmInfo, a MockLlm under a TextLlm, and oracles."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.quiet_import import quietly_import
from vllm_llm import MockLlm
from vllm_llm.text import TextLlm
from vllm_llm.wire import LlmInfo


@pytest_asyncio.fixture
async def mock_llm(tiny_info: LlmInfo) -> AsyncIterator[MockLlm]:
    """A fresh MockLlm that reports the tiny model's info."""
    llm = MockLlm(info=tiny_info)
    yield llm
    await llm.shutdown()


@pytest.fixture
def text_llm(mock_llm: MockLlm) -> TextLlm:
    """A TextLlm over the MockLlm, its tokenizer from LlmInfo.tokenizer."""
    return TextLlm(mock_llm)


@pytest.fixture(scope="session")
def hf_tokenizer(tiny_model_dir: Path) -> Any:
    """transformers' tokenizer of the tiny model (the oracle for tokenization and chat rendering)."""
    return quietly_import("transformers").AutoTokenizer.from_pretrained(str(tiny_model_dir))


@pytest.fixture(scope="session")
def vllm_tokenizer(tiny_model_dir: Path) -> Any:
    """vLLM's own tokenizer wrapper of the tiny model."""
    return quietly_import("vllm.tokenizers").get_tokenizer(str(tiny_model_dir))
