"""Caller-side features equal vLLM's own multimodal processor output for the same input: the prompt with
its placeholders expanded, the placeholder ranges, the item hashes and the tensor values, in the model's
dtype (vLLM's processor runs in this process as the oracle; no engine)."""

from __future__ import annotations

import asyncio
import base64
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from vllm_llm.engine_core._tensors import to_torch
from vllm_llm.multimodal import MediaItem, MediaOptions, load_image, load_processor
from vllm_llm.wire import LlmInfo, ModelDtype

PROMPT = "<|user|>\n<image>What is this<image>?<|eot|>\n<|assistant|>\n"


def _png(seed: int, mode: str = "RGB") -> bytes:
    channels = 4 if mode == "RGBA" else 3
    pixels = np.random.default_rng(seed).integers(0, 255, (40, 50, channels), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels, mode).save(out, "PNG")
    return out.getvalue()


def _vllm(llava_dir: Path, dtype: Any, prompt: list[int], data: list[bytes], kwargs: dict[str, Any]) -> Any:
    from vllm_llm.engine_core._vision_compat import install

    install()
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.multimodal.media import ImageMediaIO
    from vllm.multimodal.processing.context import TimingContext
    from vllm.multimodal.processing.inputs import ProcessorInputs

    processor = MULTIMODAL_REGISTRY.create_processor(ModelConfig(model=str(llava_dir), dtype=dtype))
    items = processor.info.parse_mm_data({"image": [ImageMediaIO().load_bytes(d) for d in data]})
    inputs = ProcessorInputs(prompt=prompt, mm_data_items=items, hf_processor_mm_kwargs=kwargs)
    return processor.apply(inputs, TimingContext())


def _ours(llava_dir: Path, dtype: str, prompt: list[int], data: list[bytes], kwargs: dict[str, Any]) -> Any:
    info = LlmInfo(
        model=str(llava_dir),
        served_model_name="llava",
        tokenizer=str(llava_dir),
        dtype=ModelDtype(dtype),
        max_model_len=512,
        vocab_size=1317,
        wire_revision=3,
        supports_multimodal=True,
    )
    processor = load_processor(info)
    assert processor is not None
    options = MediaOptions.from_env()

    async def prepare() -> Any:
        loaded = [
            await load_image(f"data:image/png;base64,{base64.b64encode(d).decode()}", options) for d in data
        ]
        return await processor.prepare(prompt, [MediaItem("image", image) for image in loaded], kwargs)

    return asyncio.run(prepare())


@pytest.mark.parametrize(
    ("dtype", "modes", "kwargs"),
    [
        ("bfloat16", ("RGB", "RGB"), {}),
        ("float32", ("RGB", "RGBA"), {}),
        ("bfloat16", ("RGBA", "RGB"), {"do_normalize": False}),
    ],
)
def test_features_equal_vllms_processor_output(
    llava_dir: Path, dtype: str, modes: tuple[str, str], kwargs: dict[str, Any]
) -> None:
    from tokenizers import Tokenizer

    prompt = Tokenizer.from_file(str(llava_dir / "tokenizer.json")).encode(PROMPT).ids
    data = [_png(i, mode) for i, mode in enumerate(modes)]
    theirs = _vllm(llava_dir, dtype, prompt, data, kwargs)
    ours = _ours(llava_dir, dtype, prompt, data, kwargs)
    assert ours.prompt_token_ids == theirs["prompt_token_ids"] != prompt
    ranges = [(p.offset, p.length) for p in theirs["mm_placeholders"]["image"]]
    assert [(f.offset, f.length) for f in ours.mm_features] == ranges
    assert [f.mm_hash for f in ours.mm_features] == theirs["mm_hashes"]["image"]
    assert [f.identifier for f in ours.mm_features] == theirs["mm_hashes"]["image"]
    for feature, item in zip(ours.mm_features, theirs["mm_kwargs"]["image"], strict=True):
        assert feature.data is not None and set(feature.data) == set(item)
        for key, elem in item.items():
            tensor = to_torch(feature.data[key])
            assert tensor.dtype == elem.data.dtype == getattr(torch, dtype)
            assert torch.equal(tensor, elem.data)
