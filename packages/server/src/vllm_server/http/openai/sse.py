"""Server-sent events: `data: <json>\\n\\n` frames, the `[DONE]` terminator, error frames, and the response.

A streaming generator closes its stream in `finally` with `close_shielded`: when the client goes away,
Starlette cancels the generator through an anyio cancel scope, which would otherwise cancel the cleanup's
own awaits too (and leave the engine request running).

With a keep-alive interval (vLLM's --sse-keep-alive-interval), `event_stream` sends vLLM's comment
line `: keep-alive` whenever the frames have been silent that long; with none, the frames pass as they
are (no task, no timer).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator
from typing import Protocol

import anyio
from fastapi.responses import StreamingResponse

from vllm_server.errors import error_body, map_error
from vllm_server.http.openai.codec import encode

__all__ = ["DONE", "KEEP_ALIVE", "Closable", "close_shielded", "error_event", "event", "event_stream"]

DONE = b"data: [DONE]\n\n"
#: vLLM's SSE_KEEP_ALIVE_COMMENT.
KEEP_ALIVE = b": keep-alive\n\n"


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


def event_stream(frames: AsyncIterator[bytes], keep_alive: float = 0.0) -> StreamingResponse:
    """The `text/event-stream` response over `frames`, with keep-alive comments every `keep_alive`
    seconds of silence when that is positive and finite."""
    if 0 < keep_alive < math.inf:
        frames = _with_keep_alive(frames, keep_alive)
    return StreamingResponse(frames, media_type="text/event-stream")


async def _with_keep_alive(frames: AsyncIterator[bytes], interval: float) -> AsyncIterator[bytes]:
    """`frames`, and `KEEP_ALIVE` after each `interval` without one (vLLM's with_sse_keep_alive).

    One task advances `frames` at a time and a timeout never cancels it mid-step; when the response
    ends early (client gone) the pending step is cancelled, which runs the frames' own cleanup.
    """
    step: asyncio.Task[bytes] = asyncio.ensure_future(anext(frames))
    try:
        while True:
            done, _ = await asyncio.wait({step}, timeout=interval)
            if not done:
                yield KEEP_ALIVE
                continue
            try:
                frame = step.result()
            except StopAsyncIteration:
                return
            yield frame
            step = asyncio.ensure_future(anext(frames))
    finally:
        step.cancel()
        with contextlib.suppress(BaseException):
            await step
        aclose = getattr(frames, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(BaseException):
                await aclose()
