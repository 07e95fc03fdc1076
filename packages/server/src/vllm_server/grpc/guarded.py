"""gRPC method handlers whose request decoding never ends a call with UNKNOWN.

grpc.aio ends a call whose request deserializer raises with UNKNOWN ("Unexpected DecodeError"). Every
service the server registers (vllm.internal.Llm from its method table, vllm.Inference and vllm.Control
from their .proto descriptors) decodes with a deserializer that turns bytes which are not the method's
request type into an `Undecodable`, and a handler that ends such a call with INVALID_ARGUMENT (the
error table's status for `InvalidRequest`) before the servicer runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.protobuf.message import DecodeError

from vllm_llm import InvalidRequest
from vllm_server.grpc.status import ServicerContext, abort_call

__all__ = ["Undecodable", "guarded_deserializer", "method_handler", "register_proto_service"]

Behaviour = Callable[[Any, ServicerContext], Awaitable[Any]]


class Undecodable:
    """What a guarded deserializer returns for bytes that are not the method's request type."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def guarded_deserializer(
    decode: Callable[[bytes], Any], what: str, errors: tuple[type[BaseException], ...]
) -> Callable[[bytes], Any]:
    """`decode`, with the failures in `errors` (and nesting too deep) returned as an `Undecodable`."""
    prefix = f"the request is not a valid {what}"

    def deserialize(raw: bytes) -> Any:
        try:
            return decode(raw)
        except errors as exc:
            return Undecodable(f"{prefix}: {exc}")
        except RecursionError:
            return Undecodable(f"{prefix}: nested too deeply")

    return deserialize


def method_handler(
    behaviour: Behaviour,
    *,
    streaming: bool | Literal["bidi"],
    deserializer: Callable[[bytes], Any],
    serializer: Callable[[Any], bytes],
    service: str,
) -> grpc.RpcMethodHandler:
    """The grpcio handler of one method: reject what did not decode, else serve.

    `streaming`: False (unary), True (server streaming) or "bidi". A bidi behaviour takes the request
    iterator, whose items may be `Undecodable`: it ends the call with INVALID_ARGUMENT on one itself.
    """
    if streaming == "bidi":
        return grpc.stream_stream_rpc_method_handler(
            behaviour, request_deserializer=deserializer, response_serializer=serializer
        )

    async def guarded(request: Any, context: ServicerContext) -> Any:
        if isinstance(request, Undecodable):
            await abort_call(context, InvalidRequest(request.message), service=service)
        return await behaviour(request, context)

    make = grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
    return make(guarded, request_deserializer=deserializer, response_serializer=serializer)


def register_proto_service(server: grpc.aio.Server, servicer: object, service: ServiceDescriptor) -> None:
    """Register `servicer`'s methods (named as in the .proto) for `service`, with guarded decoding."""
    handlers = {}
    for method in service.methods:
        if method.client_streaming:
            raise ValueError(f"{service.full_name}/{method.name}: client streaming is not served")
        request_type = message_factory.GetMessageClass(method.input_type)
        handlers[method.name] = method_handler(
            getattr(servicer, method.name),
            streaming=method.server_streaming,
            deserializer=guarded_deserializer(
                request_type.FromString, method.input_type.full_name, (DecodeError,)
            ),
            serializer=_serialize,
            service=service.full_name,
        )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data
