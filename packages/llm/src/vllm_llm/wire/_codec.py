"""The MessagePack codec of the wire: one encoder, one typed decoder per type, built once.

Every decoder refuses MessagePack extension types other than the tensor's (3) in `any` values: an
extension there is kept as a `msgspec.msgpack.Ext` only for the tensor's code, any other (vLLM's pickle
type 1 and cloudpickle type 2 among them) raises `ForeignExtension`, a `msgspec.DecodeError`, so every
caller that handles undecodable bytes handles it too. Typed fields never take a foreign extension either
(`Tensor` checks its code; other fields their type). This holds for requests and responses alike: a
peer's bytes, in either direction, never materialize an extension that something downstream might
unpickle.
"""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec

from vllm_llm.wire._tensor import TENSOR_EXT_CODE

T = TypeVar("T")


class ForeignExtension(msgspec.DecodeError):
    """A MessagePack extension type other than the tensor's, in an `any` value (never decoded)."""


def only_tensor_extensions(code: int, data: memoryview) -> msgspec.msgpack.Ext:
    """msgspec's `ext_hook` of every wire decoder: keep tensor bytes as an Ext, refuse any other type."""
    if code != TENSOR_EXT_CODE:
        raise ForeignExtension(f"MessagePack extension type {code} is not accepted")
    return msgspec.msgpack.Ext(code, bytes(data))


_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODERS: dict[Any, msgspec.msgpack.Decoder[Any]] = {}

#: Encode any wire value (Structs are maps or arrays by their layout).
encode: Final = _ENCODER.encode


def decoder(t: type[T]) -> msgspec.msgpack.Decoder[T]:
    """The typed decoder for `t` (built once, then reused), refusing foreign extension types."""
    dec = _DECODERS.get(t)
    if dec is None:
        dec = _DECODERS[t] = msgspec.msgpack.Decoder(t, ext_hook=only_tensor_extensions)
    return dec


def decode(data: bytes, t: type[T]) -> T:
    """Decode `data` as a `t`; raise msgspec.DecodeError (`ForeignExtension` included) or ValidationError."""
    return decoder(t).decode(data)
