"""The tensor type of the wire: `[dtype, shape, data]`, as vLLM's engine-core msgpack codec sends it.

`data` is a MessagePack extension of type 3 (vLLM's CUSTOM_TYPE_RAW_VIEW) holding the raw,
C-contiguous, native-endian bytes. The dtype string is torch-style (`float32`, `bfloat16`, `int64`)
or numpy-style (`<f4`); either way its size must match the shape.
"""

from __future__ import annotations

import math
from typing import Final

import msgspec

TENSOR_EXT_CODE: Final = 3

_ITEMSIZE: Final[dict[str, int]] = {
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "|b1": 1,
    "|u1": 1,
    "|i1": 1,
    "<i2": 2,
    "<i4": 4,
    "<i8": 8,
    "<f2": 2,
    "<f4": 4,
    "<f8": 8,
}


class Tensor(msgspec.Struct, array_like=True, gc=False):
    """An n-dimensional array: dtype, shape and raw bytes (validated on construction and decode)."""

    dtype: str
    shape: list[int]
    data: msgspec.msgpack.Ext

    def __post_init__(self) -> None:
        itemsize = _ITEMSIZE.get(self.dtype)
        if itemsize is None:
            raise ValueError(f"unsupported tensor dtype {self.dtype!r}")
        if self.data.code != TENSOR_EXT_CODE:
            raise ValueError(f"tensor data must be extension type {TENSOR_EXT_CODE}, got {self.data.code}")
        if any(d < 0 for d in self.shape):
            raise ValueError(f"tensor shape {self.shape} has a negative dimension")
        expected = math.prod(self.shape) * itemsize
        nbytes = memoryview(self.data.data).nbytes
        if nbytes != expected:
            raise ValueError(
                f"tensor of dtype {self.dtype} and shape {self.shape} needs {expected} bytes, got {nbytes}"
            )

    @classmethod
    def from_bytes(cls, dtype: str, shape: list[int], raw: bytes) -> Tensor:
        """A tensor over `raw` (C-contiguous, native-endian)."""
        return cls(dtype=dtype, shape=list(shape), data=msgspec.msgpack.Ext(TENSOR_EXT_CODE, bytes(raw)))

    @property
    def raw(self) -> bytes:
        """The raw bytes of the tensor."""
        return bytes(self.data.data)
