"""The soak tests run only under `make soak` (VLLM_SOAK=1); elsewhere they are collected and skipped,
with the reason, so a run that left them out says so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SKIP = pytest.mark.skip(reason="soak test (minutes, a real vLLM engine): run with `make soak` (VLLM_SOAK=1)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark this directory's tests skipped unless VLLM_SOAK=1."""
    if os.environ.get("VLLM_SOAK") == "1":
        return
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(SKIP)
