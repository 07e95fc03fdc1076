"""numpy arrays to wire tensors in the model's dtype, without torch (bfloat16 rounded as torch rounds it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from vllm_llm.wire import Tensor

__all__ = ["to_wire"]

_FLOAT_DTYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
_NUMPY_NAMES = {
    "bool": "bool",
    "uint8": "uint8",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
}


def _bfloat16_bits(x: npt.NDArray[Any]) -> npt.NDArray[np.uint16]:
    """The bfloat16 bit patterns of ``x``: round to nearest, ties to even; NaN stays a quiet NaN."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    out = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        out[nan] = ((bits[nan] >> np.uint32(16)) | np.uint32(0x0040)).astype(np.uint16)
    return out


def to_wire(array: npt.NDArray[np.generic], float_dtype: str) -> Tensor:
    """``array`` as a wire tensor; floating arrays are cast to ``float_dtype`` (vLLM casts the HF
    processor's floating outputs to the model dtype), other arrays keep their dtype."""
    shape = [int(d) for d in array.shape]
    if np.issubdtype(array.dtype, np.floating):
        if float_dtype == "bfloat16":
            return Tensor.from_bytes("bfloat16", shape, _bfloat16_bits(array).tobytes())
        cast = np.ascontiguousarray(array, dtype=_FLOAT_DTYPES[float_dtype])
        return Tensor.from_bytes(float_dtype, shape, cast.tobytes())
    name = _NUMPY_NAMES.get(array.dtype.name)
    if name is None:
        raise ValueError(f"unsupported processor output dtype {array.dtype}")
    return Tensor.from_bytes(name, shape, np.ascontiguousarray(array).tobytes())
