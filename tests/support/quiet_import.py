"""Importing heavy oracle modules (vLLM, transformers) without their import-time deprecation noise."""

from __future__ import annotations

import importlib
import warnings
from types import ModuleType


def quietly_import(name: str) -> ModuleType:
    """Import a heavy oracle module (vLLM, transformers) with its import-time deprecation noise silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(name)
