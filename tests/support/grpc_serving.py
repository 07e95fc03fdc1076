"""Helpers to serve an `Llm` on an ephemeral loopback port and to wait for asynchronous effects."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vllm_llm import Llm
from vllm_llm.wire import GenerateRequest, SamplingParams
from vllm_remote_llm import LlmStub
from vllm_server.grpc.listener import GrpcFrontend


@dataclass
class Served:
    """A started GrpcFrontend and where it listens."""

    frontend: GrpcFrontend
    port: int

    @property
    def target(self) -> str:
        """`127.0.0.1:<port>`."""
        return f"127.0.0.1:{self.port}"


@contextlib.asynccontextmanager
async def serving(llm: Llm, **options: Any) -> AsyncIterator[Served]:
    """Serve `llm` on 127.0.0.1 (an ephemeral port) until the block ends; the Llm is not shut down."""
    frontend = GrpcFrontend(llm, **options)
    port = await frontend.start("127.0.0.1", 0)
    try:
        yield Served(frontend, port)
    finally:
        await frontend.stop(0)


@contextlib.asynccontextmanager
async def raw_client(target: str) -> AsyncIterator[tuple[LlmStub, Any]]:
    """A plain channel's `vllm.internal.Llm` stub and health stub (no balancing, no retries)."""
    async with grpc.aio.insecure_channel(target) as channel:
        yield LlmStub(channel), health_pb2_grpc.HealthStub(channel)


def request(
    request_id: str, *, prompt: Sequence[int] = (5, 17, 42, 99, 7), **sampling: Any
) -> GenerateRequest:
    """A greedy request (max_tokens 8, ignore_eos) with `sampling` overrides."""
    params: dict[str, Any] = {"temperature": 0.0, "max_tokens": 8, "ignore_eos": True, **sampling}
    return GenerateRequest(
        request_id=request_id, prompt_token_ids=list(prompt), sampling_params=SamplingParams(**params)
    )


async def eventually(predicate: Callable[[], bool], *, within: float = 5.0, what: str = "condition") -> None:
    """Wait until `predicate()` holds (effects that cross the network arrive asynchronously)."""
    deadline = time.monotonic() + within
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not hold within {within} s")
        await asyncio.sleep(0.005)


async def settled_count(count: Callable[[], int], *, within: float = 5.0) -> int:
    """`count()` once it reached 0, or its value after `within` seconds."""
    with contextlib.suppress(AssertionError):
        await eventually(lambda: count() == 0, within=within)
    return count()


SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


def health_request(service: str) -> health_pb2.HealthCheckRequest:
    """A HealthCheckRequest for `service`."""
    return health_pb2.HealthCheckRequest(service=service)
