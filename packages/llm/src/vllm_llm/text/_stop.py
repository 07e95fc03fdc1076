"""Stop strings: the earliest match in newly generated text, as vLLM's `check_stop_strings`."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["StopMatch", "check_stop_strings"]


class StopMatch(NamedTuple):
    """A matched stop string and the length to cut the text to (-1: keep all of it)."""

    stop: str
    truncate_to: int


def check_stop_strings(
    output_text: str, new_char_count: int, stop: Sequence[str], include_in_output: bool
) -> StopMatch | None:
    """The stop string completing earliest in the last `new_char_count` chars (ties: list order)."""
    if not new_char_count or not stop:
        return None
    best: str | None = None
    best_index = 0
    best_end = sys.maxsize
    for stop_str in stop:
        # Only search text that could not have matched before.
        index = output_text.find(stop_str, 1 - new_char_count - len(stop_str))
        if index == -1:
            continue
        end = index + len(stop_str)
        if end < best_end:
            best, best_index, best_end = stop_str, index, end
    if best is None:
        return None
    if include_in_output:
        return StopMatch(best, -1 if best_end >= len(output_text) else best_end)
    return StopMatch(best, best_index)
