"""Every gRPC method a server serves answers bytes that are not its request type with INVALID_ARGUMENT.

grpc.aio would end such a call with UNKNOWN ("Unexpected DecodeError") if a deserializer raised; each
service is registered with guarded decoding (`vllm_server.grpc.guarded`). Sent to the session worker,
which serves every service (vllm.internal.Llm, vllm.Inference, vllm.Control, grpc.health.v1.Health).
"""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2

from tests.support.servers import RunningServer
from vllm_llm.wire import METHODS, SERVICE_NAME
from vllm_server.grpc.proto import control_pb2, inference_pb2

#: Not a protobuf message: a field tag whose varint never ends.
NOT_PROTOBUF = b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
#: Not MessagePack: 0xc1 is the one byte the format never uses.
NOT_MSGPACK = b"\xc1"


def _proto_methods() -> list[tuple[str, str, bool]]:
    services = [
        inference_pb2.DESCRIPTOR.services_by_name["Inference"],
        control_pb2.DESCRIPTOR.services_by_name["Control"],
        health_pb2.DESCRIPTOR.services_by_name["Health"],
    ]
    return [
        (f"/{s.full_name}/{m.name}", m.input_type.full_name, m.server_streaming)
        for s in services
        for m in s.methods
    ]


CASES = [
    *((path, NOT_PROTOBUF, what, streaming) for path, what, streaming in _proto_methods()),
    *(
        (f"/{SERVICE_NAME}/{m.name}", NOT_MSGPACK, m.request_type.__name__, m.streaming != "unary")
        for m in METHODS
    ),
]


@pytest.mark.parametrize(("path", "body", "what", "streaming"), CASES, ids=[c[0] for c in CASES])
async def test_undecodable_request_is_invalid_argument(
    worker: RunningServer, path: str, body: bytes, what: str, streaming: bool
) -> None:
    async with grpc.aio.insecure_channel(worker.grpc_target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as failed:
            await _call(channel, path, body, streaming=streaming)
    assert failed.value.code() == grpc.StatusCode.INVALID_ARGUMENT, failed.value.details()
    assert f"the request is not a valid {what}" in (failed.value.details() or "")


async def _call(channel: grpc.aio.Channel, path: str, body: bytes, *, streaming: bool) -> None:
    """Call `path` with raw `body` (no serializer: the bytes go as they are) and read every response."""
    if streaming:
        async for _ in channel.unary_stream(path)(body, timeout=30):
            pass
    else:
        await channel.unary_unary(path)(body, timeout=30)
