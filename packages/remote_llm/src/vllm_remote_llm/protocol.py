"""Call-level conventions of `vllm.internal.Llm` beyond its messages (shared by servers and RemoteLlm)."""

from __future__ import annotations

from typing import Final

#: Initial-metadata key a server sends on Generate once its Llm accepted the request: the caller can
#: return its stream then, and a validation error arrives as the call's status before it.
ACCEPTED_KEY: Final = "x-vllm-accepted"
ACCEPTED_METADATA: Final = ((ACCEPTED_KEY, "1"),)
