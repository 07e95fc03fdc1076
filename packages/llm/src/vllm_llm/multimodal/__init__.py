"""Multimodal inputs prepared at the caller (needs the ``vllm-llm[multimodal]`` extra).

Media are loaded here (``data:``, ``http(s)`` and allowed ``file:`` URLs, with vLLM's limits), the
model's HF processor turns them into tensors in the model's dtype, placeholders are expanded in the
prompt, and every item gets vLLM's ``mm_hash``, so a worker's engine takes the features as its own
input processor would have produced them.
"""

from vllm_llm.multimodal._media import ImageConversion, LoadedImage, MediaOptions, load_image
from vllm_llm.multimodal._processor import (
    MediaItem,
    MultiModalOptions,
    MultiModalProcessor,
    PreparedPrompt,
    load_processor,
)

__all__ = [
    "ImageConversion",
    "LoadedImage",
    "MediaItem",
    "MediaOptions",
    "MultiModalOptions",
    "MultiModalProcessor",
    "PreparedPrompt",
    "load_image",
    "load_processor",
]
