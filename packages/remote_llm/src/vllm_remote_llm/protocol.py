"""Call-level conventions of `vllm.internal.Llm` beyond its messages (shared by servers and RemoteLlm)."""

from __future__ import annotations

from typing import Any, Final

#: Initial-metadata key a server sends on Generate once its Llm accepted the request: the caller can
#: return its stream then, and a validation error arrives as the call's status before it.
ACCEPTED_KEY: Final = "x-vllm-accepted"
ACCEPTED_METADATA: Final = ((ACCEPTED_KEY, "1"),)

#: Trailing-metadata key of a Generate that a queue limit refused (UNAVAILABLE): the limit's name
#: (`max_num_queued_reqs`, `max_num_queued_tokens`), so the caller raises the same `AdmissionRefused`.
REFUSAL_KEY: Final = "x-vllm-refusal"


def refusal_of(metadata: Any) -> str | None:
    """The refusal a call's trailing metadata names, if any."""
    return next((str(value) for key, value in metadata or () if key == REFUSAL_KEY), None)
