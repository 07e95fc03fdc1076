"""`LlmSource`: where the server's Llm comes from — an engine core it starts, or one it is given."""

from __future__ import annotations

from dataclasses import dataclass

from vllm_llm import EngineCoreLlm, Llm
from vllm_server.config import EngineCoreConfig


class ProvidedEngineCoreLlm(ValueError):
    """An EngineCoreLlm was passed as a provided Llm."""


@dataclass(frozen=True)
class LlmSource:
    """An engine-core configuration (the server starts and owns the engine) or a provided, opaque Llm."""

    engine_core_config: EngineCoreConfig | None = None
    provided_llm: Llm | None = None

    @classmethod
    def engine_core(cls, config: EngineCoreConfig) -> LlmSource:
        """Start a vLLM engine core from `config`; engine-core routes and services are available."""
        return cls(engine_core_config=config)

    @classmethod
    def provided(cls, llm: Llm) -> LlmSource:
        """Serve `llm` as an opaque Llm (a RemoteLlm, a MockLlm, your own); no engine-core routes."""
        if isinstance(llm, EngineCoreLlm):
            raise ProvidedEngineCoreLlm(
                "an EngineCoreLlm cannot be a provided Llm: the engine-core routes and services need "
                "the server to own the engine; use "
                "LlmSource.engine_core(EngineCoreConfig(settings=llm.settings)) instead"
            )
        return cls(provided_llm=llm)
