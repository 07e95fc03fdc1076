"""`/kv_event_sources`, over an owned engine core."""

from __future__ import annotations

from typing import Any

from vllm_llm import EngineCoreLlm
from vllm_server.http.route import Handler


def kv_event_sources(engine: EngineCoreLlm) -> Handler:
    """The engines' KV-cache event publishers, keyed by data-parallel rank."""

    async def kv_event_sources() -> dict[str, Any]:
        """The KV-event publisher of each engine."""
        return {str(rank): cfg for rank, cfg in engine.kv_event_sources().items()}

    return kv_event_sources
