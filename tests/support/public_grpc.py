"""A client of the public gRPC API from the stubs generated from the same .proto files, and helpers."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from vllm_server.grpc.proto import control_pb2_grpc, inference_pb2_grpc
from vllm_server.grpc.proto import inference_pb2 as pb

# The generated stubs are untyped classes; these are their constructors' signatures.
_InferenceStub: Callable[[Any], Any] = inference_pb2_grpc.InferenceStub
_ControlStub: Callable[[Any], Any] = control_pb2_grpc.ControlStub

Responses = list[pb.GenerateResponse]

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


@dataclass
class PublicClient:
    """The `vllm.Inference`, `vllm.Control` and health stubs of one channel."""

    inference: Any
    control: Any
    health: Any

    async def check(self, service: str) -> Any:
        """The health status of `service` (raises AioRpcError NOT_FOUND for one without a status)."""
        return (await self.health.Check(health_pb2.HealthCheckRequest(service=service))).status

    async def first_watched(self, service: str) -> Any:
        """The first status a health `Watch` of `service` sends."""
        call = self.health.Watch(health_pb2.HealthCheckRequest(service=service))
        try:
            return (await call.read()).status
        finally:
            call.cancel()

    async def stream(self, request: pb.GenerateRequest, *, deadline: float = 120) -> Responses:
        """Every message of a GenerateStream call (the call's deadline `deadline` seconds away)."""
        return [r async for r in self.inference.GenerateStream(request, timeout=deadline)]


async def read_rest(call: Any) -> Responses:
    """The remaining messages of a streaming call read with `read()` (which cannot mix with iteration)."""
    out: Responses = []
    while (message := await call.read()) is not grpc.aio.EOF:
        out.append(message)
    return out


@contextlib.asynccontextmanager
async def public_client(target: str) -> AsyncIterator[PublicClient]:
    """A plain insecure channel to `target` and its stubs."""
    async with grpc.aio.insecure_channel(target) as channel:
        yield PublicClient(
            inference=_InferenceStub(channel),
            control=_ControlStub(channel),
            health=health_pb2_grpc.HealthStub(channel),
        )


@dataclass
class Choice:
    """One choice reassembled from the SequenceOutputs of a stream (or the one of a Generate)."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    num_tokens: int = 0
    logprobs: list[float] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    candidates: list[list[int]] = field(default_factory=list)
    finish: pb.FinishInfo | None = None
    outputs_after_finish: int = 0

    def add(self, out: pb.SequenceOutput) -> None:
        """Append one delta."""
        if self.finish is not None:
            self.outputs_after_finish += 1
        self.text += out.text
        self.token_ids.extend(out.token_ids)
        self.num_tokens += out.num_tokens
        self.logprobs.extend(out.logprobs)
        self.ranks.extend(out.ranks)
        self.candidates.extend([t.id for t in c.tokens] for c in out.candidate_tokens)
        if out.HasField("finish_info"):
            self.finish = out.finish_info


def choices(responses: list[pb.GenerateResponse]) -> dict[int, Choice]:
    """The choices of a stream by index (checking prompt_info comes first, alone, once)."""
    assert responses[0].HasField("prompt_info") and not responses[0].HasField("outputs")
    assert not any(r.HasField("prompt_info") for r in responses[1:])
    out: dict[int, Choice] = {}
    for r in responses[1:]:
        out.setdefault(r.outputs.index, Choice()).add(r.outputs)
    assert all(s.finish is not None and s.outputs_after_finish == 0 for s in out.values())
    return out


def choice(response: pb.GenerateResponse) -> Choice:
    """The one choice of a Generate response."""
    seq = Choice()
    seq.add(response.outputs)
    return seq


def finish_name(info: pb.FinishInfo | None) -> str:
    """The OpenAI-style name of a finish reason (`stop`, `length`, `abort`)."""
    assert info is not None
    return {pb.FinishInfo.STOP: "stop", pb.FinishInfo.LENGTH: "length", pb.FinishInfo.ABORTED: "abort"}[
        info.finish_reason
    ]
