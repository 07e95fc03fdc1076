"""Multimodal item hashes as vLLM 0.32 computes them (its MultiModalHasher), so a worker's caches hit.

vLLM hashes ``model_id``, the item (for media loaded from bytes: the encoded bytes, tagged with the
modality) and the processor options that change the result, as a stream of framed chunks: every chunk
is preceded by its 8-byte little-endian length, every value by a one-byte tag (leaf, sequence,
mapping, none), containers by their length. The keyword names are fed in sorted order. blake3 is
vLLM's default (``--mm-hash-algorithm``); sha256 and sha512 are its FIPS alternatives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from typing import Any, Literal, Protocol

import numpy as np

__all__ = ["HashAlgorithm", "item_hash"]

HashAlgorithm = Literal["blake3", "sha256", "sha512"]

_TAG_NONE = b"\x00"
_TAG_SEQUENCE = b"\x01"
_TAG_MAPPING = b"\x02"
_TAG_LEAF = b"\x03"


class _Hasher(Protocol):
    def update(self, data: bytes, /) -> object: ...
    def hexdigest(self) -> str: ...


class EncodedMedia:
    """A media item known by its encoded bytes (vLLM's MediaWithBytes): hashed as ``{modality: bytes}``,
    or ``{modality: {"io_config": ..., "data": bytes}}`` when decoding converted it (``io_config``)."""

    __slots__ = ("data", "io_config", "modality")

    def __init__(self, modality: str, data: bytes, io_config: Mapping[str, Any] | None = None) -> None:
        self.modality = modality
        self.data = data
        self.io_config = io_config


def _length(n: int) -> bytes:
    return n.to_bytes(8, "little")


def _framed(chunk: bytes) -> Iterator[bytes]:
    yield _length(len(chunk))
    yield chunk


def _leaf(obj: object) -> Iterator[bytes]:
    if isinstance(obj, bytes):
        yield from _framed(obj)
    elif isinstance(obj, str):
        yield from _framed(obj.encode("utf-8"))
    elif isinstance(obj, (int, float)):  # bool is an int: numpy stores it as one byte, as vLLM's
        yield from _framed(np.array(obj).tobytes())
    elif isinstance(obj, EncodedMedia):
        if obj.io_config:
            yield from _item(obj.modality, {"io_config": dict(obj.io_config), "data": obj.data})
        else:
            yield from _item(obj.modality, obj.data)
    else:
        raise TypeError(f"cannot hash a {type(obj).__name__}")


def _value(obj: object) -> Iterator[bytes]:
    if obj is None:
        yield _TAG_NONE
    elif isinstance(obj, (list, tuple)):
        yield _TAG_SEQUENCE
        yield _length(len(obj))
        for elem in obj:
            yield from _value(elem)
    elif isinstance(obj, Mapping):
        yield _TAG_MAPPING
        yield _length(len(obj))
        for k, v in obj.items():
            yield from _framed(str(k).encode("utf-8"))
            yield from _value(v)
    else:
        yield _TAG_LEAF
        yield from _leaf(obj)


def _item(key: str, obj: object) -> Iterator[bytes]:
    yield from _framed(key.encode("utf-8"))
    yield from _value(obj)


def _hasher(algorithm: HashAlgorithm) -> _Hasher:
    if algorithm == "blake3":
        from blake3 import blake3

        return blake3()
    return hashlib.new(algorithm)


def hash_kwargs(algorithm: HashAlgorithm, /, **kwargs: object) -> str:
    """vLLM's ``MultiModalHasher.hash_kwargs``."""
    hasher = _hasher(algorithm)
    for key, value in sorted(kwargs.items(), key=lambda kv: kv[0]):
        for chunk in _item(key, value):
            hasher.update(chunk)
    return hasher.hexdigest()


def item_hash(
    algorithm: HashAlgorithm,
    *,
    model_id: str,
    modality: str,
    data: bytes,
    uuid: str | None = None,
    io_config: Mapping[str, Any] | None = None,
    mm_processor_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The ``mm_hash`` of one media item loaded from ``data`` (vLLM's ProcessorInputs.get_mm_hashes);
    ``io_config``: the decode settings when they changed the media (vLLM's MediaWithBytes.io_config).

    A client-given ``uuid`` is the hash itself unless processor options apply, in which case it is hashed
    with them in place of the media.
    """
    factors: dict[str, object] = {}
    if mm_processor_kwargs:
        factors["mm_processor_kwargs"] = dict(mm_processor_kwargs)
    if uuid is not None and not factors:
        return uuid
    item: object = uuid if uuid is not None else EncodedMedia(modality, data, io_config)
    return hash_kwargs(algorithm, model_id=model_id, **{modality: item}, **factors)
