"""The load generator counts failed requests and goes on: a figure of every run, never a crash.

A tiny local HTTP server answers each streaming request by its number (in the prompt, "Request N"):
a good stream, a connection closed before any answer (what a client sees reusing a keep-alive
connection the server just closed: aiohttp's ServerDisconnectedError), a reset, a 500, a stream cut
off before `data: [DONE]`, an unreadable chunk, or an error event mid-stream.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import re
import socket
import struct
from collections.abc import AsyncIterator

import pytest

from vllm_frontend_bench.http_figures import failure_target, load_rows
from vllm_frontend_bench.loadgen import Load, run_load

_CHUNK = b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n'
_USAGE = b'data: {"choices":[],"usage":{"completion_tokens":3}}\n\n'
_DONE = b"data: [DONE]\n\n"
_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
#: What request N gets: MODES[N % len(MODES)].
MODES = ("ok", "close", "reset", "500", "truncated", "garbage", "error", "ok")


def _chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(re.search(rb"content-length: (\d+)", head, re.IGNORECASE).group(1))  # type: ignore[union-attr]
            body = await reader.readexactly(length)
            number = int(re.search(rb"Request (\d+)", body).group(1))  # type: ignore[union-attr]
            mode = MODES[number % len(MODES)]
            if mode == "close":
                break
            if mode == "reset":
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                break
            if mode == "500":
                error = b'{"error":{"message":"boom"}}'
                writer.write(
                    b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(error), error)
                )
                await writer.drain()
                continue
            writer.write(_HEAD)
            if mode == "garbage":
                writer.write(_chunked(b"data: {not json\n\n") + _chunked(_DONE) + b"0\r\n\r\n")
            elif mode == "error":  # vLLM's error event mid-stream, then [DONE]
                error = b'data: {"error":{"message":"engine died","code":500}}\n\n'
                writer.write(_chunked(_CHUNK) + _chunked(error) + _chunked(_DONE) + b"0\r\n\r\n")
            else:
                for _ in range(3):
                    writer.write(_chunked(_CHUNK))
                if mode == "truncated":
                    writer.write(b"0\r\n\r\n")  # a well-formed end of body, but no [DONE]
                else:
                    writer.write(_chunked(_USAGE) + _chunked(_DONE) + b"0\r\n\r\n")
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


@contextlib.asynccontextmanager
async def _server() -> AsyncIterator[str]:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_failed_requests_are_counted_not_raised(concurrency: int) -> None:
    n = 3 * len(MODES)
    async with _server() as url:
        stats = await run_load(url, Load(concurrency, n, max_tokens=3, model="tiny"))
    modes = collections.Counter(MODES[i % len(MODES)] for i in range(n))
    assert stats.failed == n - modes["ok"]
    assert stats.requests_per_s > 0
    assert stats.output_tokens == 3 * modes["ok"]  # only the requests that succeeded count
    assert stats.completion_tokens == ((3, modes["ok"]),)
    kinds = dict(stats.failure_kinds)
    assert kinds["HttpError"] == modes["500"]
    assert kinds["TruncatedStream"] == modes["truncated"]
    assert kinds["DecodeError"] == modes["garbage"]
    assert kinds["StreamError"] == modes["error"]
    # Closed before an answer, or reset: what the client reads depends on the timing of the RST.
    closed = sum(kinds.get(k, 0) for k in ("IncompleteReadError", "ConnectionResetError"))
    assert closed == modes["close"] + modes["reset"]
    assert sum(kinds.values()) == stats.failed


async def test_a_server_that_is_gone_fails_every_request() -> None:
    async with _server() as url:
        pass  # closed: nothing listens on its port any more
    stats = await run_load(url, Load(2, 5, max_tokens=3, model="tiny"))
    assert stats.failed == 5
    assert dict(stats.failure_kinds) == {"ConnectionRefusedError": 5}


async def test_failures_are_a_row_and_a_target() -> None:
    async with _server() as url:
        bad = await run_load(url, Load(1, len(MODES), max_tokens=3, model="tiny"))
        good = await run_load(url, Load(1, 1, max_tokens=3, model="tiny"))  # request 0: ok
    rows = {r.name: r for r in load_rows({1: [bad]}, {1: [good]})}
    failed = rows["c=1 failed requests"]
    assert (failed.ours.median, failed.baseline.median if failed.baseline else None) == (6.0, 0.0)
    assert failed.better == "lower"
    target = failure_target("B9", {"ours": {1: [bad]}, "baseline": {1: [good]}})
    assert not target.met
    assert target.description == "B9 no request fails"
    assert target.detail.startswith("failed requests: ours 6 (")
    assert target.detail.endswith("; baseline 0")
    assert failure_target("B9", {"baseline": {1: [good]}}).met
