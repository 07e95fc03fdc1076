"""Usage's reasoning_tokens: our `<think>` reasoning parsers count as vLLM's do, on every case of every corpus
that uses one of them — after a whole parse, and during and after a token-by-token stream."""

from __future__ import annotations

from typing import Any

import pytest

from tests.llm.parsers.parity import Corpus, Vllm, corpora, our_parser, token_steps
from vllm_llm.parsers import reasoning_parser_class
from vllm_llm.text._tokenizer import TextTokenizer

#: The reasoning parsers checked here (vLLM counts tokens between `<think>` markers, or by its parser engine).
_THINK_PARSERS = frozenset({"deepseek_r1", "deepseek_v3", "qwen3", "glm45", "glm47", "minimax_m2"})

_CASES = [
    pytest.param(corpus, case["text"], id=f"{corpus.path.stem}:{case['name']}")
    for corpus in corpora()
    if corpus.reasoning_parser in _THINK_PARSERS
    for case in corpus.cases
]


@pytest.mark.parametrize(("corpus", "text"), _CASES)
def test_whole_count_equals_vllm(
    corpus: Corpus, text: str, tokenizer: TextTokenizer, vllm_parsers: Vllm
) -> None:
    ids = tokenizer.encode(text, add_special_tokens=False)
    ours = our_parser(tokenizer, corpus)
    ours.parse(text)
    assert ours.reasoning is not None
    theirs, request = vllm_parsers.parser(corpus)
    theirs.parse(text, request, enable_auto_tools=True, model_output_token_ids=ids)
    assert ours.reasoning.count_reasoning_tokens(ids) == theirs.count_reasoning_tokens(ids)


@pytest.mark.parametrize(("corpus", "text"), _CASES)
def test_streamed_count_equals_vllm(
    corpus: Corpus, text: str, tokenizer: TextTokenizer, vllm_parsers: Vllm
) -> None:
    prompt = tokenizer.encode(corpus.prompt, add_special_tokens=False)
    ours = our_parser(tokenizer, corpus)
    ours.start(prompt)
    assert ours.reasoning is not None
    theirs: Any
    theirs, request = vllm_parsers.parser(corpus)
    steps = token_steps(tokenizer, text)
    generated: list[int] = []
    counts: list[tuple[int, int]] = []
    for n, (delta_text, ids) in enumerate(steps):
        finished = n == len(steps) - 1
        ours.feed(delta_text, ids, finished=finished)
        theirs.parse_delta(delta_text, ids, request, prompt_token_ids=prompt, finished=finished)
        generated.extend(ids)
        # continuous usage counts after every step
        counts.append(
            (
                ours.reasoning.count_reasoning_tokens(generated),
                theirs.count_reasoning_tokens(tuple(generated)),
            )
        )
    assert [o for o, _ in counts] == [t for _, t in counts]


@pytest.mark.parametrize(
    "corpus",
    [c for c in corpora() if c.reasoning_parser in _THINK_PARSERS and not c.tool_parser],
    ids=lambda c: c.path.stem,
)
def test_special_tokens_kept_as_vllm_keeps_them(corpus: Corpus, vllm_parsers: Vllm) -> None:
    """The engine-based parsers read special tokens: vLLM detokenizes their requests with them."""
    assert corpus.reasoning_parser is not None
    keeps = getattr(reasoning_parser_class(corpus.reasoning_parser), "keeps_special_tokens", False)
    assert keeps == (not vllm_parsers.skips_special_tokens(corpus))
