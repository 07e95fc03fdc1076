"""A MockLlm worker server, a RemoteLlm to it, and a router over that, all in this process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from tests.support.timing import PATIENCE
from vllm_llm import MockLlm, ParserOptions
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


@dataclass
class Cluster:
    """router (HTTP) → RemoteLlm → worker (gRPC) → MockLlm, all in this process."""

    mock: MockLlm
    worker: RunningServer
    remote: RemoteLlm
    router: RunningServer


@contextlib.asynccontextmanager
async def _cluster(
    model_dir: Path,
    *,
    step_interval: float,
    worker: ServerConfig,
    router: ServerConfig,
    timeout: float | None = None,  # noqa: ASYNC109  # the RemoteLlm's per-call deadline
    connect_timeout: float | None = 30.0,
) -> AsyncIterator[Cluster]:
    """A worker server (`worker`) over a fresh MockLlm, a RemoteLlm to it (with `timeout` and
    `connect_timeout`) and a router server (`router`) over that; stopped in the reverse order."""
    mock = tiny_mock(model_dir, step_interval=step_interval)
    served = await start_server(worker, LlmSource.provided(mock))
    client = await RemoteLlm.connect(served.grpc_target, timeout=timeout, connect_timeout=connect_timeout)
    front = await start_server(router, LlmSource.provided(client))
    try:
        yield Cluster(mock, served, client, front)
    finally:
        await front.stop()
        await client.shutdown()
        await served.stop()
        await mock.shutdown()


def open_cluster(model_dir: Path) -> contextlib.AbstractAsyncContextManager[Cluster]:
    """A worker server over a fresh MockLlm and a router server over a RemoteLlm to it (deadline PATIENCE)."""
    return _cluster(
        model_dir,
        step_interval=0.002,
        worker=ServerConfig(
            port=0, grpc_port=0, max_request_body_bytes=1 << 20, max_grpc_message_bytes=1 << 20
        ),
        router=ServerConfig(port=0, grpc_port=None, tokenizer=str(model_dir), max_request_body_bytes=1 << 20),
        # The deadline only turns a hang into a failure: 200 streams at once on a loaded machine took
        # > 5 s to be accepted by this (same-process) worker.
        timeout=PATIENCE,
        connect_timeout=10,
    )


#: The router's parsers in the parsing-at-the-router tests (the worker runs none).
ROUTER_PARSERS = ParserOptions(
    enable_auto_tool_choice=True, tool_call_parser="hermes", reasoning_parser="deepseek_r1"
)


def open_parsing_cluster(model_dir: Path) -> contextlib.AbstractAsyncContextManager[Cluster]:
    """worker (MockLlm, no parsers) ← RemoteLlm ← router (hermes + deepseek_r1): set `mock.script`."""
    return _cluster(
        model_dir,
        step_interval=0.0005,
        worker=ServerConfig(port=0, grpc_port=0),
        router=ServerConfig(port=0, grpc_port=None, tokenizer=str(model_dir), parsers=ROUTER_PARSERS),
    )


async def no_engine_work(mock: MockLlm, *, within: float = 10) -> None:
    """Wait (bounded) until the engine has no request in flight."""
    await asyncio.wait_for(mock.subscribe_running().wait_for(lambda n: n == 0), within)
