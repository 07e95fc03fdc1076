"""An HTTP load generator for streaming chat completions, on raw asyncio streams (cheap per chunk).

`concurrency` keep-alive connections take `num_requests` requests from one queue. Each request asks for
exactly `max_tokens` tokens (`ignore_eos`), so every server does the same work. TTFT is the time to
the first chunk with content; inter-token latency (ITL) is the gap between consecutive content chunks
of a stream (as vLLM's `bench serve` counts it).

A request that fails counts as failed and the run goes on: a non-200 answer, a connection the server
closed or reset (a keep-alive connection closed while the client was about to reuse it reads as an
empty response), an error event in the stream, a stream that ends without `data: [DONE]`, an
unreadable chunk, or no answer within
`REQUEST_TIMEOUT`. The connection is then opened anew for the next request. `LoadStats.failed` is
the count, `LoadStats.failure_kinds` says what they were.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import math
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import msgspec

from vllm_frontend_bench.stats import percentile


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None


class _Usage(msgspec.Struct):
    completion_tokens: int = 0


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    #: An error event in the stream (vLLM's `data: {"error": {...}}` when a request fails mid-stream).
    error: dict[str, Any] | None = None


_CHUNK = msgspec.json.Decoder(_Chunk)
#: A request that takes longer counts as failed (a hung server must not hang the benchmark).
REQUEST_TIMEOUT = 120.0
_ENCODE = msgspec.json.encode


@dataclass(slots=True)
class RequestTiming:
    """One request: when it started, when content chunks arrived, how many tokens it reported."""

    start: float
    chunks: list[float] = field(default_factory=list)
    end: float = 0.0
    completion_tokens: int = 0
    done: bool = False
    error: str = ""


@dataclass(frozen=True, slots=True)
class LoadStats:
    """The figures of one load level."""

    requests_per_s: float
    output_tokens_per_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    itl_p50_ms: float
    itl_p99_ms: float
    tokens_per_chunk: float
    failed: int
    #: Output tokens of the requests that succeeded (their usage's `completion_tokens`).
    output_tokens: int = 0
    #: What the failures were: (exception type, count), most frequent first.
    failure_kinds: tuple[tuple[str, int], ...] = ()
    #: How many requests reported each `completion_tokens`: (tokens, requests), by tokens.
    completion_tokens: tuple[tuple[int, int], ...] = ()
    #: CPU seconds per 1,000 output tokens of the process(es) the measurement watched (NaN: none).
    cpu_s_per_1k_tokens: float = math.nan


@dataclass(frozen=True, slots=True)
class Load:
    """A load level: how many requests, how many at once, how long each."""

    concurrency: int
    num_requests: int
    max_tokens: int
    model: str


class HttpError(Exception):
    """The server answered with a non-200 status."""


class TruncatedStream(Exception):
    """The stream ended without `data: [DONE]`."""


class StreamError(Exception):
    """The stream carried an error event."""


#: What a failed request raises (anything else is a bug of the load generator and propagates).
_FAILURES = (
    HttpError,
    TruncatedStream,
    StreamError,
    OSError,  # ConnectionResetError, ConnectionRefusedError, BrokenPipeError, ...
    asyncio.IncompleteReadError,  # closed mid-response, or before it (a reused keep-alive connection)
    asyncio.LimitOverrunError,
    TimeoutError,
    ValueError,  # an unreadable status line, chunk size or SSE payload (msgspec.DecodeError)
)


async def run_load(base_url: str, load: Load) -> LoadStats:
    """Send `load` to `base_url` and measure it."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(load.num_requests):
        queue.put_nowait(i)
    timings: list[RequestTiming] = []
    failures: list[BaseException] = []
    start = time.perf_counter()
    await asyncio.gather(
        *(_connection(base_url, load, queue, timings, failures) for _ in range(load.concurrency))
    )
    duration = time.perf_counter() - start
    return load_stats(timings, duration, failures)


def load_stats(timings: list[RequestTiming], duration: float, failures: Sequence[BaseException]) -> LoadStats:
    """The figures of a load: the requests that succeeded (`timings`), how long it took, what failed."""
    ttft = [(t.chunks[0] - t.start) * 1000 for t in timings if t.chunks]
    itl = [(b - a) * 1000 for t in timings for a, b in itertools.pairwise(t.chunks)]
    tokens = sum(t.completion_tokens for t in timings)
    chunks = sum(len(t.chunks) for t in timings)
    kinds = collections.Counter(type(f).__name__ for f in failures)
    return LoadStats(
        requests_per_s=len(timings) / duration,
        output_tokens_per_s=tokens / duration,
        ttft_p50_ms=percentile(ttft, 50),
        ttft_p99_ms=percentile(ttft, 99),
        itl_p50_ms=percentile(itl, 50),
        itl_p99_ms=percentile(itl, 99),
        tokens_per_chunk=tokens / chunks if chunks else 0.0,
        failed=len(failures),
        output_tokens=tokens,
        failure_kinds=tuple(kinds.most_common()),
        completion_tokens=tuple(sorted(collections.Counter(t.completion_tokens for t in timings).items())),
    )


async def _connection(
    base_url: str,
    load: Load,
    queue: asyncio.Queue[int],
    timings: list[RequestTiming],
    failures: list[BaseException],
) -> None:
    """One keep-alive connection taking requests from `queue`; a failure closes it (the next request
    opens a new one) and is counted, never raised."""
    url = urlsplit(base_url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    stream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    try:
        while not queue.empty():
            i = queue.get_nowait()
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    if stream is None:
                        stream = await asyncio.open_connection(host, port)
                    timings.append(await _one(*stream, f"{host}:{port}", load, i))
            except _FAILURES as exc:
                failures.append(exc)
                if stream is not None:
                    stream[1].close()
                    stream = None
    finally:
        if stream is not None:
            stream[1].close()


def user_message(i: int) -> str:
    """The content of request `i`'s one user message."""
    return f"Request {i}: tell me a long story about the sea."


def _body(load: Load, i: int) -> bytes:
    return _ENCODE(
        {
            "model": load.model,
            "messages": [{"role": "user", "content": user_message(i)}],
            "max_tokens": load.max_tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


async def _one(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, load: Load, i: int
) -> RequestTiming:
    body = _body(load, i)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        f"Accept: text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    timing = RequestTiming(start=time.perf_counter())
    writer.write(head.encode() + body)
    status, headers = await _read_head(reader)
    if status != 200:
        raise HttpError(f"HTTP {status}: {(await _read_body(reader, headers))[:300]!r}")
    buffer = b""
    async for data in _body_parts(reader, headers):
        buffer += data
        *events, buffer = buffer.split(b"\n\n")
        now = time.perf_counter()
        for event in events:
            _on_event(event, now, timing)
    if timing.error:
        raise StreamError(f"error event: {timing.error[:300]}")
    if not timing.done:
        raise TruncatedStream(f"the stream ended without data: [DONE] after {len(timing.chunks)} chunks")
    timing.end = time.perf_counter()
    return timing


def _on_event(event: bytes, now: float, timing: RequestTiming) -> None:
    for line in event.split(b"\n"):
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            timing.done = True
            return
        chunk = _CHUNK.decode(payload)
        if any(c.delta is not None and c.delta.content for c in chunk.choices):
            timing.chunks.append(now)
        if chunk.usage is not None:
            timing.completion_tokens = chunk.usage.completion_tokens
        if chunk.error is not None:
            timing.error = str(chunk.error)


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    raw = await reader.readuntil(b"\r\n\r\n")
    status_line, *lines = raw.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    return b"".join([part async for part in _body_parts(reader, headers)])


async def _body_parts(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    else:
        yield await reader.readexactly(int(headers.get("content-length", "0")))
