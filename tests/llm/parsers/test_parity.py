"""Every corpus in `corpus/`, every case: our parsers equal vLLM's, whole and streamed token by token."""

from __future__ import annotations

import pytest

from tests.llm.parsers.parity import Corpus, Vllm, corpora, our_tool_choice, ours_streamed, ours_whole
from vllm_llm.chat._parsing import ParserOptions, Parsing
from vllm_llm.parsers import REASONING_PARSERS, TOOL_PARSERS
from vllm_llm.text._tokenizer import TextTokenizer

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


@pytest.mark.parametrize("corpus", corpora(), ids=lambda c: c.path.stem)
def test_special_tokens_kept_as_vllm_keeps_them(corpus: Corpus, vllm_parsers: Vllm) -> None:
    """The chat layer detokenizes with skip_special_tokens as vLLM's parsers set it for the request."""
    parsing = Parsing(
        ParserOptions(
            enable_auto_tool_choice=corpus.tool_parser is not None,
            tool_call_parser=corpus.tool_parser,
            reasoning_parser=corpus.reasoning_parser,
        )
    )
    keeps = parsing.keeps_special_tokens(corpus.tools, our_tool_choice(corpus.tool_choice))
    assert keeps == (not vllm_parsers.skips_special_tokens(corpus))


@pytest.mark.parametrize(("corpus", "text"), _CASES)
def test_streamed_in_deltas_of_three_tokens_equals_vllm(
    corpus: Corpus, text: str, tokenizer: TextTokenizer, vllm_parsers: Vllm
) -> None:
    """Deltas of several tokens, as a stream interval or a slow reader delivers them."""
    theirs = vllm_parsers.streamed(tokenizer, corpus, text, every=3)
    assert ours_streamed(tokenizer, corpus, text, every=3) == theirs


def test_every_parser_has_a_corpus_of_at_least_20_outputs() -> None:
    """Each parser class behind a name (aliases share one) is proven on 20 outputs or more."""
    cases: dict[str, int] = {}
    for corpus in corpora():
        if corpus.tool_choice not in ("auto", "none"):
            continue  # forced-choice corpora prove the generic handling, not a format
        for table, name in ((TOOL_PARSERS, corpus.tool_parser), (REASONING_PARSERS, corpus.reasoning_parser)):
            if name is not None:
                cases[table[name]] = cases.get(table[name], 0) + len(corpus.cases)
    short = {
        path: cases.get(path, 0)
        for path in {*TOOL_PARSERS.values(), *REASONING_PARSERS.values()}
        if cases.get(path, 0) < 20
    }
    assert not short, short
