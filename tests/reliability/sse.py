"""Streaming completions over HTTP: the frames of one SSE response, and a signal once the first arrived."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Streamed:
    """What one streamed completion delivered."""

    status: int = 0
    frames: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    first: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def text(self) -> str:
        """The concatenated text of the chunks."""
        return "".join(c["text"] for f in self.frames for c in f.get("choices", ()))

    @property
    def finish_reasons(self) -> list[str]:
        """The finish reasons the chunks carried."""
        return [
            c["finish_reason"] for f in self.frames for c in f.get("choices", ()) if c.get("finish_reason")
        ]

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The SSE error events."""
        return [f["error"] for f in self.frames if "error" in f]


async def stream_completion(
    http: httpx.AsyncClient, body: dict[str, Any], into: Streamed | None = None
) -> Streamed:
    """POST a streaming completion and read it to its end (or to a transport failure)."""
    got = into if into is not None else Streamed()
    try:
        async with http.stream("POST", "/v1/completions", json={**body, "stream": True}) as response:
            got.status = response.status_code
            if response.status_code != 200:
                await response.aread()
                got.frames.append(response.json())
                return got
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    got.done = True
                    continue
                got.frames.append(json.loads(line[6:]))
                got.first.set()
    finally:
        got.first.set()
    return got


def completion(i: int, max_tokens: int) -> dict[str, Any]:
    """A distinct deterministic completion body."""
    return {"model": "tiny", "prompt": f"request number {i}", "max_tokens": max_tokens, "ignore_eos": True}
