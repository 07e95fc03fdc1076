"""Server-sent events: `data: <json>\\n\\n` frames, the `[DONE]` terminator, error frames, and the response.

A streaming generator closes its stream in `finally` with `close_shielded`: when the client goes away,
Starlette cancels the generator through an anyio cancel scope, which would otherwise cancel the cleanup's
own awaits too (and leave the engine request running).

With a keep-alive interval (vLLM's --sse-keep-alive-interval), `event_stream` sends vLLM's comment
line `: keep-alive` whenever the frames have been silent that long; with none, the frames pass as they
are (no task, no timer).

`SseResponse` is Starlette's StreamingResponse with the roles of its two tasks swapped: the frames are
written by the request's own task, as soon as the handler returns, while a child task watches for the
client's disconnect and cancels the writing when it comes (Starlette writes from a new task, which
starts one event-loop turn later: under load, one more wait behind every other stream's step for each
request's first token). The disconnect watch is kept: a client gone while no frame flows (a long
prefill, a queued request) still ends the stream at once, and the frames' cleanup aborts the request.
The watch is a plain task that cancels an anyio cancel scope around the writing only when the client
goes away; at the end it is just cancelled. An anyio task group did the same for about 100 µs more per
request (its exit waits a loop turn for the watch to end, and cancelling its scope formats the
cancelling task's repr): 705 -> 603 µs of a `--mock` server's CPU per one-token request at c=32
(docs/performance.md).

`DirectBodySend`, outermost around the app, leaves the HTTP server's own `send` in the scope; the
frames after the response's start go to it straight. Every layer of the stack wraps `send` to look at
the start message alone (its status, its headers: Starlette's error and exception middleware, request
id, load and metrics, CORS, tracing), and each wrapper was one more call or coroutine per SSE frame, a
frame per token. The start message still passes every layer. Without the key (an app served by other
means, a test client, or one with a middleware of the user's, which may read or rewrite the body:
`--middleware`, a SageMaker customer's) the frames take the stack's `send`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Protocol

import anyio
from fastapi.responses import StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from vllm_server.errors import error_body, map_error
from vllm_server.http.openai.codec import encode

__all__ = [
    "BODY_SEND_KEY",
    "DONE",
    "KEEP_ALIVE",
    "Closable",
    "DirectBodySend",
    "SseResponse",
    "close_shielded",
    "error_event",
    "event",
    "event_stream",
]

logger = logging.getLogger(__name__)

DONE = b"data: [DONE]\n\n"
#: vLLM's SSE_KEEP_ALIVE_COMMENT.
KEEP_ALIVE = b": keep-alive\n\n"


#: The scope key under which `DirectBodySend` leaves the HTTP server's own `send`.
BODY_SEND_KEY = "vllm_server.body_send"


class DirectBodySend:
    """Outermost ASGI layer: leaves the server's `send` in each HTTP scope for `SseResponse`'s frames
    (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[BODY_SEND_KEY] = send
        await self.app(scope, receive, send)


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


class SseResponse(StreamingResponse):
    """A streaming response written by the request's own task, a child task watching for the client's
    disconnect (see the module docstring)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        try:
            with anyio.CancelScope() as writing:
                watch = asyncio.get_running_loop().create_task(self._cancel_on_disconnect(receive, writing))
                try:
                    await self._write(send, scope.get(BODY_SEND_KEY, send))
                finally:
                    watch.cancel()
        finally:
            # Cancelled between two frames (in `send`), the frames' generator still holds its request.
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
        if self.background is not None:
            await self.background()

    @staticmethod
    async def _cancel_on_disconnect(receive: Receive, writing: anyio.CancelScope) -> None:
        """The disconnect watch: cancel `writing` when the client goes away (or its receive fails)."""
        try:
            while (await receive())["type"] != "http.disconnect":
                pass
        except Exception:
            logger.exception("the disconnect watch of a streaming response failed; ending the stream")
        writing.cancel()

    async def _write(self, send: Send, body_send: Send) -> None:
        """Starlette's `stream_response`, the start through the stack's `send`, the frames through
        `body_send`."""
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for chunk in self.body_iterator:
            if not isinstance(chunk, bytes | memoryview):
                chunk = chunk.encode(self.charset)
            await body_send({"type": "http.response.body", "body": chunk, "more_body": True})
        await body_send({"type": "http.response.body", "body": b"", "more_body": False})


def event_stream(frames: AsyncIterator[bytes], keep_alive: float = 0.0) -> StreamingResponse:
    """The `text/event-stream` response over `frames`, with keep-alive comments every `keep_alive`
    seconds of silence when that is positive and finite."""
    if 0 < keep_alive < math.inf:
        frames = _with_keep_alive(frames, keep_alive)
    return SseResponse(frames, media_type="text/event-stream")


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
