"""A tiny local "gpt-oss" for the Harmony tests: a config whose model_type is gpt_oss, gpt-oss's generation
config (its eos ids: <|return|>, <|endoftext|>, <|call|>), and a tokenizer over Harmony's o200k vocabulary
with its special tokens at their ids, built from the `openai_harmony` encoding (no download).

The tokenizer decodes exactly as the Harmony encoding does (each id's bytes, byte-level); it carries no BPE
merges, so it encodes text byte by byte: the chat layer renders Harmony prompts with `openai_harmony`, and
these tests never encode text with it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openai_harmony import HarmonyEncodingName, load_harmony_encoding  # type: ignore[import-untyped]
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

RETURN, ENDOFTEXT, CALL = 200002, 199999, 200012
ORDINARY = 199998
"""Ids below this are o200k's ordinary tokens; the specials follow."""


def _byte_chars() -> dict[int, str]:
    """GPT-2's byte-to-unicode table (what byte-level BPE vocabularies are written in)."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = list(printable)
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def build_harmony_model(root: Path) -> Path:
    """Write the model directory under `root` (once) and return it."""
    model = root / "tiny-gpt-oss"
    if (model / "tokenizer.json").is_file():
        return model
    model.mkdir(parents=True, exist_ok=True)
    encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    specials: dict[int, str] = {}
    for text in encoding._inner.special_tokens():
        (token,) = encoding.encode(text, allowed_special="all")
        specials[token] = text
    table = _byte_chars()
    vocab: dict[str, int] = {}
    for token in range(ORDINARY):
        vocab["".join(table[b] for b in encoding._inner.decode_bytes([token]))] = token
    for token, text in specials.items():
        vocab[text] = token
    assert len(vocab) == ORDINARY + len(specials) == max(specials) + 1
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for _, t in sorted(specials.items())]
    )
    tokenizer.save(str(model / "tokenizer.json"))
    _write(model / "tokenizer_config.json", {"eos_token": "<|return|>", "pad_token": "<|endoftext|>"})
    _write(model / "config.json", {"model_type": "gpt_oss", "architectures": ["GptOssForCausalLM"]})
    _write(model / "generation_config.json", {"eos_token_id": [RETURN, ENDOFTEXT, CALL]})
    return model


def _write(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2))
