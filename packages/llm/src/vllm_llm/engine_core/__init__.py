"""`EngineCoreLlm`: the `Llm` over vLLM's engine core, the only importer of vllm and torch (lazily)."""

from vllm_llm.engine_core._llm import (
    PROMPT_TOKEN_SOURCES,
    EngineCoreLlm,
    EngineCounters,
    IterationObserver,
    PauseMode,
)

__all__ = [
    "PROMPT_TOKEN_SOURCES",
    "EngineCoreLlm",
    "EngineCounters",
    "IterationObserver",
    "PauseMode",
]
