"""`google.protobuf.Struct` to and from JSON-like dicts (the kv/ec transfer parameters of the public API).

A Struct stores every number as a double; integral values within 2**53 come back as `int`, as the
Rust server does, so connector parameters such as block ids and ports keep their type.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2

__all__ = ["dict_to_struct", "struct_to_dict"]

_MAX_SAFE_INTEGER = float((1 << 53) - 1)


def struct_to_dict(struct: struct_pb2.Struct) -> dict[str, Any]:
    """The dict a Struct holds."""
    return {key: _value(value) for key, value in struct.fields.items()}


def dict_to_struct(value: dict[str, Any]) -> struct_pb2.Struct:
    """A Struct holding `value` (JSON-like: dicts, lists, strings, numbers, bools, None)."""
    struct = struct_pb2.Struct()
    struct.update(value)
    return struct


def _value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "number_value":
        n = value.number_value
        return int(n) if n.is_integer() and abs(n) <= _MAX_SAFE_INTEGER else n
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return struct_to_dict(value.struct_value)
    if kind == "list_value":
        return [_value(v) for v in value.list_value.values]
    return None
