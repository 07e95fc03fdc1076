"""Wire multimodal features to vLLM's `MultiModalFeatureSpec`s (imports vLLM and torch; EngineCoreLlm).

What vLLM's own input processor builds for a processed item: a `MultiModalKwargsItem` whose fields are
batched elements (the item's slice of each processor output), a `PlaceholderRange` at the item's offset,
`mm_hash` and the encoder-cache `identifier` (prefixed with the LoRA name when the engine applies LoRA to
the vision tower). The identifier is derived here, not taken from the caller.

Between this process and the engine core, vLLM's sender cache (`--mm-processor-cache-type lru`, a mirror
of the engine core's receiver cache) replaces the data of an item the engine already holds with None, so
a repeated image crosses the process boundary without its tensors, as under vLLM's own frontend; its
hit counters are vLLM's ``vllm:mm_cache_queries`` / ``vllm:mm_cache_hits``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vllm.config import VllmConfig
from vllm.lora.request import LoRARequest
from vllm.multimodal import MULTIMODAL_REGISTRY
from vllm.multimodal.cache import processor_cache_from_config
from vllm.multimodal.inputs import (
    MultiModalBatchedField,
    MultiModalFeatureSpec,
    MultiModalFieldElem,
    MultiModalKwargsItem,
    PlaceholderRange,
)
from vllm.utils.cache import CacheInfo
from vllm.v1.metrics.stats import MultiModalCacheStats

from vllm_llm._errors import InvalidRequest, TooManyMediaItems
from vllm_llm.engine_core._tensors import to_torch
from vllm_llm.wire import MultiModalFeature


class MultiModalLowering:
    """Checks wire features against the engine's model and lowers them through vLLM's sender cache."""

    def __init__(self, vllm_config: VllmConfig) -> None:
        model = vllm_config.model_config
        self._multimodal = bool(model.is_multimodal_model)
        self._config = model.multimodal_config if self._multimodal else None
        self._lora = vllm_config.lora_config
        self._cache = processor_cache_from_config(vllm_config) if self._multimodal else None
        self._supported: set[str] = set()
        #: Per-request cache figures for vLLM's stats log since it last took them (`record_requests`).
        self._request_stats: MultiModalCacheStats | None = None
        #: Cache figures since `cache_stats` last took them (taken from the cache after each request).
        self._untaken = CacheInfo(hits=0, total=0)
        if self._multimodal:
            info = MULTIMODAL_REGISTRY.create_processor(model).info
            self._supported = set(info.supported_mm_limits)

    def check(self, features: Sequence[MultiModalFeature], prompt_len: int) -> None:
        """vLLM's limits per modality and placeholder ranges inside the prompt, in order, disjoint."""
        if not self._multimodal:
            raise InvalidRequest("this model does not take multimodal inputs", param="mm_features")
        counts: dict[str, int] = {}
        end = 0
        for feature in features:
            counts[feature.modality] = counts.get(feature.modality, 0) + 1
            if feature.offset < end or feature.length <= 0 or feature.offset + feature.length > prompt_len:
                raise InvalidRequest(
                    f"the placeholder of a {feature.modality} item ({feature.offset}, length "
                    f"{feature.length}) is outside the prompt or overlaps another",
                    param="mm_features",
                )
            end = feature.offset + feature.length
            if feature.data is None and not self._is_cached(feature):
                raise InvalidRequest(
                    f"the {feature.modality} item {self._hash(feature)} has no data and is not cached "
                    "by this engine; send its data",
                    param="mm_features",
                )
        assert self._config is not None
        for modality, count in counts.items():
            supported = modality in self._supported
            limit = self._config.get_limit_per_prompt(modality) if supported else 0
            if count > limit:
                raise TooManyMediaItems(modality, limit=limit, supported=supported)

    def lower(
        self, features: Sequence[MultiModalFeature], lora: LoRARequest | None
    ) -> list[MultiModalFeatureSpec]:
        """The engine's feature specs; items the engine already caches go without data."""
        specs = []
        for feature in features:
            mm_hash = self._hash(feature)
            item = _kwargs_item(feature)
            if self._cache is not None:
                item, _ = self._cache.get_and_update_item((item, []) if item is not None else None, mm_hash)
            specs.append(
                MultiModalFeatureSpec(
                    data=item,
                    modality=feature.modality,
                    identifier=self._identifier(mm_hash, lora),
                    mm_position=PlaceholderRange(
                        offset=feature.offset,
                        length=feature.length,
                        is_embed=to_torch(feature.is_embed) if feature.is_embed is not None else None,
                    ),
                    mm_hash=mm_hash,
                )
            )
        self._record_request()
        return specs

    def invalidate(self, mm_hashes: Sequence[str]) -> None:
        """Forget items the engine reported missing (vLLM's P0/P1 drift recovery)."""
        if self._cache is not None:
            for mm_hash in mm_hashes:
                self._cache.invalidate(mm_hash)

    def cache_stats(self) -> Any:
        """The sender cache's counters since the last call (vLLM's CacheInfo), or None without a cache."""
        if self._cache is None:
            return None
        untaken, self._untaken = self._untaken, CacheInfo(hits=0, total=0)
        return untaken

    def record_requests(self) -> None:
        """From now on count each request's cache lookups as one request, for vLLM's stats log (as vLLM's
        renderer does after it put a request's items through the cache: `update_mm_cache_stats`)."""
        if self._cache is not None and self._request_stats is None:
            self._request_stats = MultiModalCacheStats()

    def take_request_stats(self) -> MultiModalCacheStats | None:
        """The per-request figures since the last call (vLLM's renderer's ``stat_mm_cache``), or None when
        they are not counted."""
        stats = self._request_stats
        if stats is not None:
            self._request_stats = MultiModalCacheStats()
        return stats

    def _record_request(self) -> None:
        """Take the cache's figures of the request just lowered (the only lookups that count)."""
        if self._cache is None:
            return
        delta = self._cache.make_stats(delta=True)
        untaken = self._untaken
        self._untaken = CacheInfo(hits=untaken.hits + delta.hits, total=untaken.total + delta.total)
        if self._request_stats is not None:
            self._request_stats.record(delta.total, delta.hits)

    def _is_cached(self, feature: MultiModalFeature) -> bool:
        return self._cache is not None and self._cache.is_cached_item(self._hash(feature))

    @staticmethod
    def _hash(feature: MultiModalFeature) -> str:
        return feature.mm_hash if feature.mm_hash is not None else feature.identifier

    def _identifier(self, mm_hash: str, lora: LoRARequest | None) -> str:
        # vLLM's InputProcessor._get_mm_identifier
        if lora is None or self._lora is None or not self._lora.enable_tower_connector_lora:
            return mm_hash
        return f"{lora.lora_name}:{mm_hash}"


def _kwargs_item(feature: MultiModalFeature) -> MultiModalKwargsItem | None:
    if feature.data is None:
        return None
    field = MultiModalBatchedField()
    return MultiModalKwargsItem(
        {key: MultiModalFieldElem(data=to_torch(t), field=field) for key, t in feature.data.items()}
    )
