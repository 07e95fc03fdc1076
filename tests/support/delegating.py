"""`DelegatingLlm`: an opaque Llm that forwards to another (so a server over it serves no Control)."""

from __future__ import annotations

from vllm_llm.delegating import DelegatingLlm

__all__ = ["DelegatingLlm"]
