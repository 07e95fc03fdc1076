"""Every corpus in `corpus/`, every case: our parsers equal vLLM's, whole and streamed token by token."""

from __future__ import annotations

import pytest

from tests.llm.parsers.parity import Corpus, Vllm, corpora, ours_streamed, ours_whole
from vllm_llm._text_tokenizer import TextTokenizer
from vllm_llm.parsers import tool_parser_class

_CASES = [
    pytest.param(corpus, case["text"], id=f"{corpus.path.stem}:{case['name']}")
    for corpus in corpora()
    for case in corpus.cases
]


@pytest.mark.parametrize(("corpus", "text"), _CASES)
def test_whole_equals_vllm(corpus: Corpus, text: str, tokenizer: TextTokenizer, vllm_parsers: Vllm) -> None:
    assert ours_whole(tokenizer, corpus, text) == vllm_parsers.whole(corpus, text)


@pytest.mark.parametrize(("corpus", "text"), _CASES)
def test_streamed_equals_vllm(
    corpus: Corpus, text: str, tokenizer: TextTokenizer, vllm_parsers: Vllm
) -> None:
    assert ours_streamed(tokenizer, corpus, text) == vllm_parsers.streamed(tokenizer, corpus, text)


@pytest.mark.parametrize("corpus", [c for c in corpora() if c.tool_parser], ids=lambda c: c.path.stem)
def test_special_tokens_kept_as_vllm_keeps_them(corpus: Corpus, vllm_parsers: Vllm) -> None:
    assert corpus.tool_parser is not None
    keeps = tool_parser_class(corpus.tool_parser).keeps_special_tokens
    assert keeps == (not vllm_parsers.skips_special_tokens(corpus))
