"""`/kv_event_sources`, over an owned engine core."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from vllm_llm import EngineCoreLlm


def router(engine: EngineCoreLlm) -> APIRouter:
    """`/kv_event_sources`: the engines' KV-cache event publishers, keyed by data-parallel rank."""
    r = APIRouter()

    @r.get("/kv_event_sources")
    async def kv_event_sources() -> dict[str, Any]:
        """The KV-event publisher of each engine."""
        return {str(rank): cfg for rank, cfg in engine.kv_event_sources().items()}

    return r
