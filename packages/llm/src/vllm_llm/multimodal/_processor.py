"""Multimodal inputs prepared at the caller, as vLLM 0.32's input processor prepares them.

The model's HF processor (transformers, loaded from the model directory; it needs neither vLLM nor
torch) turns the media into the engine's tensors; the tensors are cast to the model's dtype from
`LlmInfo`; each image's placeholder token in the prompt is expanded to the number of embeddings its
encoder produces; each item gets vLLM's ``mm_hash``. The result rides on `GenerateRequest.mm_features`.

What the caller must know about a model beyond its HF processor (vLLM keeps it in the model's code:
the placeholder a chat message gets, which processor outputs the model reads and how they batch) is in
`_FAMILIES`; a multimodal architecture not listed there is refused with a message naming the ones that
are.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vllm_llm._errors import InvalidRequest, TooManyMediaItems
from vllm_llm.multimodal._hashing import HashAlgorithm, item_hash
from vllm_llm.multimodal._media import LoadedImage, MediaOptions
from vllm_llm.multimodal._tensors import to_wire
from vllm_llm.wire import LlmInfo, MultiModalFeature

__all__ = ["MediaItem", "MultiModalOptions", "MultiModalProcessor", "PreparedPrompt", "load_processor"]


@dataclass(frozen=True)
class _Family:
    """What vLLM's model code says about one multimodal architecture."""

    placeholders: Mapping[str, str]
    """The text a media item of each modality becomes in a message (vLLM's get_placeholder_str)."""
    batched_keys: Mapping[str, tuple[str, ...]]
    """Per modality, the HF processor outputs the model reads, one slice per item (vLLM's
    MultiModalFieldConfig.batched); other outputs are dropped, as vLLM drops them."""


_LLAVA = _Family(placeholders={"image": "<image>"}, batched_keys={"image": ("pixel_values",)})
_FAMILIES: Mapping[str, _Family] = {"LlavaForConditionalGeneration": _LLAVA}
_MODALITY_KWARGS = {"image": "images_kwargs", "video": "videos_kwargs", "audio": "audio_kwargs"}
_OTHER_MODALITY_KWARGS = {m: {k for n, k in _MODALITY_KWARGS.items() if n != m} for m in _MODALITY_KWARGS}


@dataclass(frozen=True)
class MultiModalOptions:
    """The caller's multimodal settings (vLLM's flags of the same names)."""

    media: MediaOptions = field(default_factory=MediaOptions.from_env)
    limit_mm_per_prompt: Mapping[str, int] = field(default_factory=dict)
    """``--limit-mm-per-prompt``: the most items of each modality in one prompt (999 when unset)."""
    mm_processor_kwargs: Mapping[str, Any] = field(default_factory=dict)
    """``--mm-processor-kwargs``: defaults for the HF processor; a request's own override them."""
    hash_algorithm: HashAlgorithm = "blake3"


@dataclass(frozen=True)
class MediaItem:
    """One media item of a request, loaded, in prompt order."""

    modality: str
    image: LoadedImage
    uuid: str | None = None


@dataclass(frozen=True)
class PreparedPrompt:
    """The prompt with its placeholders expanded, and the features that fill them."""

    prompt_token_ids: list[int]
    mm_features: list[MultiModalFeature]


class MultiModalProcessor:
    """Prepares one model's media at the caller (see the module docstring)."""

    def __init__(self, info: LlmInfo, source: str, family: _Family, options: MultiModalOptions) -> None:
        self._info = info
        self._source = source
        self._family = family
        self.options = options
        self._hf: Any = None
        self._image_token_id: int | None = None

    @property
    def modalities(self) -> tuple[str, ...]:
        """The modalities the model takes."""
        return tuple(self._family.placeholders)

    def placeholder(self, modality: str) -> str:
        """The text one item of ``modality`` becomes in a message."""
        return self._family.placeholders[modality]

    def check_count(self, modality: str, count: int) -> None:
        """vLLM's validate_num_items: the model's and ``--limit-mm-per-prompt``'s limits."""
        supported = modality in self._family.placeholders
        allowed = self.options.limit_mm_per_prompt.get(modality, 999)
        limit = allowed if supported else 0
        if count > limit:
            raise TooManyMediaItems(modality, limit=limit, supported=supported)

    def _processor(self) -> Any:
        if self._hf is None:
            from transformers import AutoProcessor

            self._hf = AutoProcessor.from_pretrained(self._source)  # type: ignore[no-untyped-call]
            token = self._hf.image_token
            self._image_token_id = int(self._hf.tokenizer.convert_tokens_to_ids(token))
        return self._hf

    async def prepare(
        self,
        prompt_token_ids: Sequence[int],
        items: Sequence[MediaItem],
        mm_processor_kwargs: Mapping[str, Any] | None = None,
    ) -> PreparedPrompt:
        """Run the HF processor (off the event loop) and build the features; raises `InvalidRequest`."""
        return await asyncio.to_thread(
            self._prepare, list(prompt_token_ids), list(items), dict(mm_processor_kwargs or {})
        )

    def _prepare(
        self, prompt: list[int], items: list[MediaItem], request_kwargs: dict[str, Any]
    ) -> PreparedPrompt:
        # vLLM hashes the request's own processor kwargs (those of other modalities left out) and runs
        # the processor with the configured defaults under them.
        kwargs = {**self.options.mm_processor_kwargs, **request_kwargs}
        hashed_kwargs = {k: v for k, v in request_kwargs.items() if k not in _OTHER_MODALITY_KWARGS["image"]}
        images = [item for item in items if item.modality == "image"]
        if not images:
            return PreparedPrompt(prompt_token_ids=prompt, mm_features=[])
        self.check_count("image", len(images))
        processor = self._processor()
        outputs, counts = self._run(processor, [item.image for item in images], kwargs)
        prompt, ranges = self._expand(prompt, counts)
        features = []
        for index, (item, (offset, length)) in enumerate(zip(images, ranges, strict=True)):
            mm_hash = item_hash(
                self.options.hash_algorithm,
                model_id=self._info.model,
                modality="image",
                data=item.image.original_bytes,
                uuid=item.uuid,
                io_config=_io_config(item.image),
                mm_processor_kwargs=hashed_kwargs,
            )
            data = {key: to_wire(batch[index], self._info.dtype.value) for key, batch in outputs.items()}
            features.append(
                MultiModalFeature(
                    modality="image",
                    identifier=mm_hash,
                    offset=offset,
                    length=length,
                    mm_hash=mm_hash,
                    data=data,
                )
            )
        return PreparedPrompt(prompt_token_ids=prompt, mm_features=features)

    def _run(
        self, processor: Any, images: list[LoadedImage], kwargs: dict[str, Any]
    ) -> tuple[dict[str, np.ndarray[Any, Any]], list[int]]:
        """The model's processor outputs (one row per image) and each image's embedding count."""
        pil = [image.image for image in images]
        try:
            out = processor(text=processor.image_token * len(pil), images=pil, return_tensors="np", **kwargs)
            sizes = [(image.height, image.width) for image in pil]
            counts = [
                int(n) for n in processor._get_num_multimodal_tokens(image_sizes=sizes).num_image_tokens
            ]
        except Exception as exc:  # the processor's own validation of kwargs or media
            raise InvalidRequest(
                f"Failed to apply {type(processor).__name__} on the images: {exc}", param="messages"
            ) from exc
        keys = self._family.batched_keys["image"]
        return {key: np.asarray(out[key]) for key in keys if key in out}, counts

    def _expand(self, prompt: list[int], counts: list[int]) -> tuple[list[int], list[tuple[int, int]]]:
        """Replace the first image tokens, one per image, by as many as the image's embeddings."""
        token = self._image_token_id
        assert token is not None
        out: list[int] = []
        ranges: list[tuple[int, int]] = []
        for tok in prompt:
            if tok == token and len(ranges) < len(counts):
                n = counts[len(ranges)]
                ranges.append((len(out), n))
                out.extend([token] * n)
            else:
                out.append(tok)
        if len(ranges) != len(counts):
            raise InvalidRequest(
                f"Expected there to be {len(counts)} prompt placeholders corresponding to {len(counts)} "
                f"image items, but instead found {len(ranges)} prompt placeholders! Make sure the prompt "
                "has one image placeholder per image.",
                param="messages",
            )
        return out, ranges


def _io_config(image: LoadedImage) -> dict[str, Any] | None:
    conversion = image.conversion
    if conversion is None:
        return None
    return {"image_mode": conversion.image_mode, "rgba_background_color": conversion.rgba_background_color}


def _architecture(source: str) -> str | None:
    import json

    path = os.path.join(source, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except OSError:
        return None
    architectures = config.get("architectures") or []
    return str(architectures[0]) if architectures else None


def load_processor(info: LlmInfo, options: MultiModalOptions | None = None) -> MultiModalProcessor | None:
    """The caller-side processor of ``info``'s model; None when the model takes no media.

    The processor is read from the model directory as the worker names it (``LlmInfo.model``), else the
    tokenizer source. Raises ValueError for a multimodal architecture the caller cannot prepare.
    """
    if not info.supports_multimodal:
        return None
    for source in (info.model, info.tokenizer):
        architecture = _architecture(source)
        if architecture is not None:
            break
    else:
        raise ValueError(
            f"the model {info.model!r} takes multimodal inputs, but no config.json was found in "
            f"{info.model!r} or {info.tokenizer!r} to prepare them at the caller"
        )
    family = _FAMILIES.get(architecture)
    if family is None:
        raise ValueError(
            f"multimodal inputs of {architecture} cannot be prepared at the caller yet "
            f"(supported: {', '.join(sorted(_FAMILIES))})"
        )
    return MultiModalProcessor(info, source, family, options or MultiModalOptions())
