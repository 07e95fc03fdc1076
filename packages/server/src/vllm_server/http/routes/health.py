"""Probes: `/health` (liveness) and `/ready` (readiness)."""

from __future__ import annotations

from fastapi import Response

from vllm_server.errors import probe_status
from vllm_server.http.route import Handler
from vllm_server.state import ServerState


def health(state: ServerState) -> Handler:
    """The liveness probe over `state`."""

    async def health() -> Response:
        """200 while the Llm is alive; 503 while an engine this server starts is starting, and once the
        Llm failed for good."""
        return Response(status_code=probe_status(state.alive))

    return health


def ready(state: ServerState) -> Handler:
    """The readiness probe over `state`."""

    async def ready() -> Response:
        """200 while the server takes new requests; 503 while starting, paused, asleep or draining."""
        return Response(status_code=probe_status(state.subscribe_readiness().value))

    return ready
