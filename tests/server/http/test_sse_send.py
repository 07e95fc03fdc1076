"""SSE frames go straight to the HTTP server's `send` (`DirectBodySend`): every layer of the middleware
stack still sees each response's start, no layer sees a stream's frames, and the client gets them all.

Real uvicorn on loopback, the official `openai` client, a MockLlm.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import openai
import pytest_asyncio
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.support.mock import tiny_mock
from tests.support.servers import start_server
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource
from vllm_server.state import ServerState

CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}


@dataclass
class Seen:
    """The messages a layer of the stack saw, by path."""

    messages: dict[str, list[str]] = field(default_factory=dict)


class Recorder:
    """A middleware layer like ours: wraps `send` and notes each message's type."""

    def __init__(self, app: ASGIApp, *, seen: Seen) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        noted = self.seen.messages.setdefault(scope["path"], [])

        async def note(message: Message) -> None:
            noted.append(message["type"])
            await send(message)

        await self.app(scope, receive, note)


@pytest_asyncio.fixture
async def served(tiny_model_dir: Path) -> AsyncIterator[tuple[openai.AsyncOpenAI, Seen]]:
    seen = Seen()

    def add_recorder(app: FastAPI, _: ServerState) -> None:
        app.add_middleware(Recorder, seen=seen)

    mock = tiny_mock(tiny_model_dir)
    server = await start_server(
        ServerConfig(port=0, grpc_port=None), LlmSource.provided(mock), extensions=[add_recorder]
    )
    client = openai.AsyncOpenAI(base_url=f"{server.base_url}/v1", api_key="none", max_retries=0)
    yield client, seen
    await client.close()
    await server.stop()
    await mock.shutdown()


async def test_a_streams_frames_pass_no_layer_and_all_reach_the_client(
    served: tuple[openai.AsyncOpenAI, Seen],
) -> None:
    client, seen = served
    raw = await client.chat.completions.with_raw_response.create(**CHAT, stream=True)  # type: ignore[call-overload]
    chunks = [chunk async for chunk in raw.parse()]
    # every frame arrived: the role chunk, five tokens, the finish reason
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) == 5
    assert chunks[-1].choices[0].finish_reason == "length"
    # the start still passed every layer (the request id's layer put its header on it) ...
    assert raw.headers["x-request-id"]
    # ... and a layer of the stack saw the start alone
    assert seen.messages["/v1/chat/completions"] == ["http.response.start"]


async def test_a_whole_response_still_passes_every_layer(
    served: tuple[openai.AsyncOpenAI, Seen],
) -> None:
    client, seen = served
    reply = await client.chat.completions.create(**CHAT)  # type: ignore[call-overload]
    assert reply.choices[0].finish_reason == "length"
    assert seen.messages["/v1/chat/completions"] == ["http.response.start", "http.response.body"]
