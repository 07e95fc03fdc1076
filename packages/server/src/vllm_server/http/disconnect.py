"""`unless_disconnected`: a non-streamed response's work, cancelled when its client goes away.

A streamed response learns that its client left when a write fails, and its generator's cleanup aborts
the request in the engine. A non-streamed one writes nothing until the end: without a watch, a client
that gave up (a timeout, a closed connection) leaves its request running to `max_tokens`, holding a
batch slot and KV cache for an answer nobody reads. vLLM's server races each such handler with a
listener on the connection (`with_cancellation`, `listen_for_disconnect`); so does this. The body has
been read when the work starts, so the next ASGI message is the client's `http.disconnect` (or the
server's, once the response went out, by which time the watch has been cancelled).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from fastapi import Request, Response

from vllm_server.http.openai.codec import json_response

__all__ = ["CLIENT_CLOSED_REQUEST", "unless_disconnected"]

#: The status logged for a request whose client left before its response (nginx's; nobody reads it).
CLIENT_CLOSED_REQUEST = 499


async def unless_disconnected(request: Request, work: Coroutine[Any, Any, object]) -> Response:
    """`work`'s result as a JSON response, or a 499 response once `work` is cancelled because the client
    disconnected (its cleanup aborts its engine requests, as when a streamed client goes away)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        await asyncio.wait((task,))  # its cleanup runs to its end: the requests are aborted
        if task.cancelled():
            return Response(status_code=CLIENT_CLOSED_REQUEST)
    return json_response(task.result())


async def _disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
