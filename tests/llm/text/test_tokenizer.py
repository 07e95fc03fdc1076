"""TextTokenizer against transformers (tokenization) and vLLM (token strings); tokenizer overrides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from tests.support.quiet_import import quietly_import
from vllm_llm import MockLlm, Unsupported
from vllm_llm.text import TextLlm, TextRequest, TextTokenizer

TEXTS = ["Hello world", " the cat sees <|user|> a dog</s>", "déjà vu — 東京 🚀", "def f(x):\n    return x"]


@pytest.mark.parametrize("text", TEXTS)
def test_encode_decode_match_transformers(text: str, tiny_model_dir: Path, hf_tokenizer: Any) -> None:
    tok = TextTokenizer.from_dir(tiny_model_dir)
    for special in (True, False):
        ids = tok.encode(text, add_special_tokens=special)
        assert ids == hf_tokenizer.encode(text, add_special_tokens=special)
        for skip in (True, False):
            assert tok.decode(ids, skip_special_tokens=skip) == hf_tokenizer.decode(
                ids, skip_special_tokens=skip
            )


def test_special_tokens_match_transformers(tiny_model_dir: Path, hf_tokenizer: Any) -> None:
    tok = TextTokenizer.from_dir(tiny_model_dir)
    assert tok.special_tokens_map == hf_tokenizer.special_tokens_map
    assert (tok.bos_token_id, tok.eos_token_id) == (hf_tokenizer.bos_token_id, hf_tokenizer.eos_token_id)
    assert tok.all_special_ids == set(hf_tokenizer.all_special_ids)
    assert tok.vocab_size == len(hf_tokenizer)


def test_token_strings_match_vllm(tiny_model_dir: Path, vllm_tokenizer: Any) -> None:
    utils = quietly_import("vllm.tokenizers.detokenizer_utils")
    ids = list(range(0, 1280, 7))
    assert TextTokenizer.from_dir(tiny_model_dir).decode_each(ids) == utils.convert_ids_list_to_tokens(
        vllm_tokenizer, ids
    )


async def test_tokenizer_overrides(tiny_model_dir: Path, mock_llm: MockLlm) -> None:
    by_path = TextLlm(mock_llm, tokenizer=tiny_model_dir)
    ready = TextLlm(mock_llm, tokenizer=Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json")))
    for llm in (by_path, ready):
        (req,) = llm.lower(TextRequest(request_id="o", prompt="Hello world"))
        assert req.prompt_token_ids[0] == 1


def test_missing_tokenizer_is_unsupported(tmp_path: Path, mock_llm: MockLlm) -> None:
    with pytest.raises(Unsupported):
        TextLlm(mock_llm, tokenizer=tmp_path).lower(TextRequest(request_id="x", prompt="hi"))
