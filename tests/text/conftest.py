"""Fixtures of the text/chat suite: the tiny model's LlmInfo, a MockLlm under a TextLlm, and oracles."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import pytest_asyncio

from tests.support.mock import tiny_info as support_tiny_info
from vllm_llm import MockLlm
from vllm_llm.text import TextLlm
from vllm_llm.wire import LlmInfo

MAX_MODEL_LEN = 512


def quietly_import(name: str) -> ModuleType:
    """Import a heavy oracle module (vLLM, transformers) with its import-time deprecation noise silenced."""
    import importlib

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(name)


@pytest.fixture(scope="session")
def generation_config(tiny_model_dir: Path) -> dict[str, Any]:
    """The tiny model's generation_config.json."""
    data: dict[str, Any] = json.loads((tiny_model_dir / "generation_config.json").read_text())
    return data


@pytest.fixture(scope="session")
def tiny_info(tiny_model_dir: Path) -> LlmInfo:
    """The LlmInfo an engine over the tiny model reports."""
    return support_tiny_info(tiny_model_dir)


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
