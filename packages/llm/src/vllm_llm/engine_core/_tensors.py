"""Conversions between the wire `Tensor` and torch tensors / numpy arrays (imports torch)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from vllm_llm.wire import Tensor

_TORCH_DTYPES: dict[str, torch.dtype] = {
    "bool": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float32": torch.float32,
    "float64": torch.float64,
}


def to_torch(t: Tensor) -> torch.Tensor:
    """A torch tensor over a copy of the wire tensor's bytes."""
    dtype = _TORCH_DTYPES.get(t.dtype)
    if dtype is None:
        np_dtype = np.dtype(t.dtype)
        return torch.from_numpy(np.frombuffer(bytearray(t.raw), dtype=np_dtype).reshape(t.shape))
    buf = bytearray(t.raw)
    if not buf:
        return torch.empty(t.shape, dtype=dtype)
    return torch.frombuffer(buf, dtype=torch.uint8).view(dtype).reshape(t.shape)


def from_torch(x: Any) -> Tensor:
    """The wire tensor of a torch tensor (C-contiguous copy, torch-style dtype name)."""
    x = x.detach().contiguous().cpu()
    dtype = str(x.dtype).removeprefix("torch.")
    raw = x.view(torch.uint8).numpy().tobytes() if x.numel() else b""
    return Tensor.from_bytes(dtype, list(x.shape), raw)
