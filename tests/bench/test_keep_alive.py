"""How long the server keeps an idle keep-alive connection: vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE.

The load generator reuses connections; when the server closes one the client is about to reuse (a stall
longer than the keep-alive timeout), the request fails. The timeout is the operator's to set, with the
variable vLLM's server reads (vllm/envs.py: seconds, default 5).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from fastapi import FastAPI

from tests.support.mock import tiny_mock
from tests.support.servers import start_server
from vllm_server.config import ServerConfig
from vllm_server.server import Server
from vllm_server.source import LlmSource


async def _idle_seconds_until_closed(base_url: str) -> float:
    """Send one request on a fresh connection, then time how long the server keeps it open idle."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET /health HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200"), head
        length = int(next(v for k, _, v in (line.partition(b":") for line in head.split(b"\r\n"))
                          if k.lower() == b"content-length"))  # fmt: skip
        await reader.readexactly(length)
        idle = time.monotonic()
        assert await asyncio.wait_for(reader.read(), 30) == b""  # the server closed it
        return time.monotonic() - idle
    finally:
        writer.close()


async def test_the_keep_alive_timeout_is_read_from_vllms_variable(
    tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "1")
    llm = tiny_mock(tiny_model_dir)
    running = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(llm))
    try:
        idle = await _idle_seconds_until_closed(running.base_url)
    finally:
        await running.stop()
        await llm.shutdown()
    assert 0.8 <= idle < 4.0  # 1 s (uvicorn checks it on its own clock), not the default 5


def test_the_default_is_vllms(tiny_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", raising=False)
    server = Server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(tiny_mock(tiny_model_dir)))
    assert server._uvicorn_config(FastAPI()).timeout_keep_alive == 5
    monkeypatch.setenv("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "75")
    assert server._uvicorn_config(FastAPI()).timeout_keep_alive == 75
