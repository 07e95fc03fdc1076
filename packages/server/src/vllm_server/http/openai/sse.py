"""Server-sent events: `data: <json>\\n\\n` frames, the `[DONE]` terminator, error frames, and the response.

A streaming generator closes its stream in `finally` with `close_shielded`: when the client goes away,
Starlette cancels the generator through an anyio cancel scope, which would otherwise cancel the cleanup's
own awaits too (and leave the engine request running).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

import anyio
from fastapi.responses import StreamingResponse

from vllm_server.errors import error_body, map_error
from vllm_server.http.openai.codec import encode

__all__ = ["DONE", "Closable", "close_shielded", "error_event", "event", "event_stream"]

DONE = b"data: [DONE]\n\n"


class Closable(Protocol):
    """Anything with an async `aclose` (TextStream, ChatStream, GenerateStream, ...)."""

    async def aclose(self) -> None: ...


def event(payload: bytes) -> bytes:
    """One SSE frame carrying `payload` (JSON bytes)."""
    return b"data: " + payload + b"\n\n"


def error_event(exc: BaseException) -> bytes:
    """The SSE frame reporting `exc` after the response has started (vLLM's streaming error body)."""
    return event(encode(error_body(map_error(exc))))


async def close_shielded(stream: Closable) -> None:
    """Close `stream` (aborting an unfinished request) even while the task is cancelled (client gone)."""
    with anyio.CancelScope(shield=True):
        await stream.aclose()


def event_stream(frames: AsyncIterator[bytes]) -> StreamingResponse:
    """The `text/event-stream` response over `frames`."""
    return StreamingResponse(frames, media_type="text/event-stream")
