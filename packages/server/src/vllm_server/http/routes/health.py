"""Probes: `/health` (liveness) and `/ready` (readiness)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from vllm_server.state import ServerState


def router(state: ServerState) -> APIRouter:
    """Liveness and readiness probes."""
    r = APIRouter()

    @r.get("/health")
    async def health() -> Response:
        """200 while the Llm is alive; 503 once it failed for good."""
        return Response(status_code=200 if state.llm.subscribe_health().value else 503)

    @r.get("/ready")
    async def ready() -> Response:
        """200 while the server takes new requests; 503 while starting, paused, asleep or draining."""
        return Response(status_code=200 if state.subscribe_readiness().value else 503)

    return r
