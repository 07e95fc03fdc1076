"""`SseResponse`'s disconnect watch, driven as an ASGI app: it ends the writing when the client goes
away (or its `receive` fails), and it does not outlive a response that ended by itself.

The real server's side (uvicorn, an engine request aborted when its client leaves) is in
`test_server_flags.py` and `test_errors.py`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from starlette.types import Message

from vllm_server.http.openai.sse import SseResponse

SCOPE = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": []}


class Frames:
    """Frames that wait on `release` before the second one, and note how they ended."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.closed = False
        self.cancelled = False

    async def __call__(self) -> AsyncIterator[bytes]:
        try:
            yield b"data: 1\n\n"
            await self.release.wait()
            yield b"data: 2\n\n"
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        finally:
            self.closed = True


class Client:
    """`receive` and `send` of one request: `receive` waits until the client leaves (or fails)."""

    def __init__(self) -> None:
        self.sent: list[Message] = []
        self.body_sent = asyncio.Event()
        self.leave = asyncio.Event()
        self.fail = False
        self.receiving = asyncio.Event()
        self.receive_cancelled = asyncio.Event()

    async def receive(self) -> Message:
        self.receiving.set()
        try:
            await self.leave.wait()
        except asyncio.CancelledError:
            self.receive_cancelled.set()
            raise
        if self.fail:
            raise RuntimeError("receive broke")
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body":
            self.body_sent.set()

    def bodies(self) -> list[bytes]:
        return [m["body"] for m in self.sent if m["type"] == "http.response.body"]


async def test_a_stream_that_ends_by_itself_stops_its_watch() -> None:
    frames, client = Frames(), Client()
    response = asyncio.create_task(SseResponse(frames()).__call__(SCOPE, client.receive, client.send))
    await asyncio.wait_for(client.receiving.wait(), 10)  # the watch waits for the client
    frames.release.set()
    await asyncio.wait_for(response, 10)
    assert client.bodies() == [b"data: 1\n\n", b"data: 2\n\n", b""]
    # The watch was waiting in `receive`; it is cancelled, not left waiting for a client that stays.
    await asyncio.wait_for(client.receive_cancelled.wait(), 10)
    assert frames.closed and not frames.cancelled


async def test_a_client_gone_while_the_frames_wait_ends_the_writing() -> None:
    frames, client = Frames(), Client()
    response = asyncio.create_task(SseResponse(frames()).__call__(SCOPE, client.receive, client.send))
    await asyncio.wait_for(client.body_sent.wait(), 10)  # the first frame is out; the frames now wait
    client.leave.set()
    await asyncio.wait_for(response, 10)  # returns normally: the cancellation was the response's own
    assert frames.cancelled and frames.closed
    assert client.bodies() == [b"data: 1\n\n"]  # no more frames, no end of body: the client is gone


async def test_a_failed_receive_ends_the_stream_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    frames, client = Frames(), Client()
    client.fail = True
    response = asyncio.create_task(SseResponse(frames()).__call__(SCOPE, client.receive, client.send))
    await asyncio.wait_for(client.body_sent.wait(), 10)
    with caplog.at_level(logging.ERROR, logger="vllm_server.http.openai.sse"):
        client.leave.set()
        await asyncio.wait_for(response, 10)
    assert frames.cancelled and frames.closed
    assert "disconnect watch" in caplog.text and "receive broke" in caplog.text
