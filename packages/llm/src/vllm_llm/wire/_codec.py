"""The MessagePack codec of the wire: one encoder, one typed decoder per type, built once."""

from __future__ import annotations

from typing import Any, Final, TypeVar

import msgspec

T = TypeVar("T")

_ENCODER: Final = msgspec.msgpack.Encoder()
_DECODERS: dict[Any, msgspec.msgpack.Decoder[Any]] = {}

#: Encode any wire value (Structs are maps or arrays by their layout).
encode: Final = _ENCODER.encode


def decoder(t: type[T]) -> msgspec.msgpack.Decoder[T]:
    """The typed decoder for `t` (built once, then reused)."""
    dec = _DECODERS.get(t)
    if dec is None:
        dec = _DECODERS[t] = msgspec.msgpack.Decoder(t)
    return dec


def decode(data: bytes, t: type[T]) -> T:
    """Decode `data` as a `t`; raise msgspec.DecodeError / ValidationError on bad input."""
    return decoder(t).decode(data)
