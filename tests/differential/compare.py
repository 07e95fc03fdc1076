"""Deep comparison of vLLM's JSON answers with ours: every field either side sets, floats within 1e-4."""

from __future__ import annotations

import math
from typing import Any

import pytest

__all__ = ["REL", "assert_same"]

#: Logprobs are computed by the same engine on the same model; only float noise may differ.
REL = 1e-4
#: Fields that differ by construction between two servers (ids, timestamps, build fingerprints).
VOLATILE = frozenset({"id", "created", "system_fingerprint"})


def assert_same(theirs: Any, ours: Any, *, ignore: frozenset[str] = frozenset(), path: str = "$") -> None:
    """Assert `ours` equals `theirs`, a field absent on one side counting as null; `ignore` names keys."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key in sorted(theirs.keys() | ours.keys()):
            if key not in VOLATILE and key not in ignore:
                assert_same(theirs.get(key), ours.get(key), ignore=ignore, path=f"{path}.{key}")
    elif isinstance(theirs, list) and isinstance(ours, list):
        assert len(ours) == len(theirs), f"{path}: vLLM has {len(theirs)} items, ours {len(ours)}"
        for i, (t, o) in enumerate(zip(theirs, ours, strict=True)):
            assert_same(t, o, ignore=ignore, path=f"{path}[{i}]")
    elif isinstance(theirs, float) and isinstance(ours, float) and math.isfinite(theirs):
        assert ours == pytest.approx(theirs, rel=REL, abs=1e-6), f"{path}: vLLM {theirs!r}, ours {ours!r}"
    else:
        assert ours == theirs, f"{path}: vLLM {theirs!r}, ours {ours!r}"
