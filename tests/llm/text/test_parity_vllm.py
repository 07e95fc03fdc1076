"""Parity: TextLlm over a real engine (`engine_llm`) against vLLM's own `LLM.generate` (`vllm_oracle`).

Each case is one TextSamplingParams; the oracle gets the same parameters as vLLM's SamplingParams, with
the generation-config defaults filled in for unset sampling knobs (what vLLM's serving layer does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from tests.support.vllm_oracle import VllmOracle
from vllm_llm import Llm
from vllm_llm.text import TextLlm, TextRequest, TextResult, TextSamplingParams, TokenLogprobs
from vllm_llm.wire import GenerationDefaults

PROMPTS = {
    "cat": "The cat sees a red apple",
    "question": "What is the weather like today? Sure,",
    "code": "def add_numbers(x, y):\n    return",
}
MANY_STOP_IDS = list(range(300, 700))

CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("greedy", "cat", {"temperature": 0.0, "max_tokens": 16}),
    ("greedy-ignore-eos", "question", {"temperature": 0.0, "max_tokens": 40, "ignore_eos": True}),
    ("seeded", "cat", {"temperature": 1.0, "seed": 1234, "max_tokens": 20}),
    ("seeded-gen-defaults", "code", {"seed": 7, "max_tokens": 20}),
    (
        "seeded-top-k-p",
        "question",
        {"temperature": 0.9, "top_k": 5, "top_p": 0.5, "seed": 3, "max_tokens": 20},
    ),
    ("stop-excluded", "cat", {"temperature": 0.0, "max_tokens": 40, "ignore_eos": True, "stop": ["e", "a "]}),
    (
        "stop-included",
        "question",
        {
            "temperature": 0.0,
            "max_tokens": 40,
            "ignore_eos": True,
            "stop": ["o", "s"],
            "include_stop_str_in_output": True,
        },
    ),
    (
        "stop-min-tokens",
        "cat",
        {"temperature": 0.0, "max_tokens": 40, "ignore_eos": True, "stop": ["e"], "min_tokens": 6},
    ),
    ("stop-token-ids", "cat", {"temperature": 0.0, "max_tokens": 30, "stop_token_ids": MANY_STOP_IDS}),
    (
        "stop-token-ids-included",
        "code",
        {
            "temperature": 0.0,
            "max_tokens": 30,
            "stop_token_ids": MANY_STOP_IDS,
            "include_stop_str_in_output": True,
        },
    ),
    (
        "stop-ids-min-tokens",
        "question",
        {"temperature": 0.0, "max_tokens": 30, "stop_token_ids": MANY_STOP_IDS, "min_tokens": 8},
    ),
    ("ignore-eos-max-tokens", "code", {"temperature": 0.0, "max_tokens": 25, "ignore_eos": True}),
    ("logprobs", "cat", {"temperature": 0.0, "max_tokens": 12, "logprobs": 3}),
    (
        "prompt-logprobs",
        "question",
        {"temperature": 0.0, "max_tokens": 6, "prompt_logprobs": 2, "logprobs": 0},
    ),
    ("bad-words", "cat", {"temperature": 0.0, "max_tokens": 20, "bad_words": ["the", " a", "apple"]}),
    (
        "special-tokens-shown",
        "cat",
        {
            "temperature": 0.0,
            "max_tokens": 12,
            "ignore_eos": True,
            "logit_bias": {5: 8.0, 6: 6.0},
            "skip_special_tokens": False,
            "spaces_between_special_tokens": False,
        },
    ),
    (
        "special-tokens-skipped",
        "cat",
        {"temperature": 0.0, "max_tokens": 12, "ignore_eos": True, "logit_bias": {5: 8.0}},
    ),
    (
        "penalties",
        "code",
        {"temperature": 0.0, "max_tokens": 20, "repetition_penalty": 1.3, "presence_penalty": 0.5},
    ),
    ("n2-seeded", "question", {"n": 2, "temperature": 1.0, "seed": 11, "max_tokens": 15}),
    (
        "n2-logprobs-stop",
        "cat",
        {"n": 2, "temperature": 0.8, "seed": 5, "max_tokens": 30, "logprobs": 2, "stop": ["o"]},
    ),
]

_DEFAULTED = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
)


def oracle_params(params: dict[str, Any], defaults: GenerationDefaults) -> dict[str, Any]:
    """vLLM SamplingParams kwargs: the case's, plus the generation-config defaults for unset knobs."""
    filled = {
        f: getattr(defaults, f) for f in _DEFAULTED if f not in params and getattr(defaults, f) is not None
    }
    return {**filled, **params}


def positions(entries: Sequence[TokenLogprobs | None] | None) -> list[Any] | None:
    if entries is None:
        return None
    return [
        None if p is None else [[c.token_id, c.logprob, c.rank, c.token] for c in p.candidates]
        for p in entries
    ]


def assert_positions_close(ours: list[Any] | None, theirs: list[Any] | None) -> None:
    assert (ours is None) == (theirs is None)
    if ours is None or theirs is None:
        return
    assert len(ours) == len(theirs)
    for mine, expected in zip(ours, theirs, strict=True):
        assert (mine is None) == (expected is None)
        if mine is None:
            continue
        assert [(t, r, s) for t, _, r, s in mine] == [(t, r, s) for t, _, r, s in expected]
        assert [lp for _, lp, _, _ in mine] == pytest.approx([lp for _, lp, _, _ in expected], abs=1e-3)


def assert_same(ours: TextResult, theirs: dict[str, Any]) -> None:
    assert ours.prompt_token_ids == theirs["prompt_token_ids"]
    assert_positions_close(positions(ours.prompt_logprobs), theirs["prompt_logprobs"])
    expected = sorted(theirs["outputs"], key=lambda c: c["index"])
    assert len(ours.choices) == len(expected)
    for choice, want in zip(ours.choices, expected, strict=True):
        assert choice.token_ids == want["token_ids"]
        assert choice.text == want["text"]
        assert choice.finish_reason == want["finish_reason"]
        assert choice.stop_reason == want["stop_reason"]
        if want["cumulative_logprob"] is None:
            assert choice.cumulative_logprob is None
        else:
            assert choice.cumulative_logprob == pytest.approx(want["cumulative_logprob"], abs=1e-3)
        assert_positions_close(positions(choice.logprobs), want["logprobs"])


@pytest.mark.parametrize(("name", "prompt", "params"), CASES, ids=[c[0] for c in CASES])
async def test_text_llm_matches_vllm(
    name: str, prompt: str, params: dict[str, Any], engine_llm: Llm, vllm_oracle: VllmOracle
) -> None:
    text = TextLlm(engine_llm)
    prompt_ids = text.encode(PROMPTS[prompt])
    defaults = engine_llm.info().generation_defaults or GenerationDefaults()
    # Ask the oracle for every case at once (one engine batch), then read this case's answer.
    jobs = [(text.encode(PROMPTS[p]), oracle_params(kw, defaults)) for _, p, kw in CASES]
    theirs = vllm_oracle.generate(jobs)[[c[0] for c in CASES].index(name)]
    ours = await text.complete(
        TextRequest(request_id=f"parity-{name}", prompt=prompt_ids, params=TextSamplingParams(**params))
    )
    assert_same(ours, theirs)
    assert ours.usage.completion_tokens == sum(len(c.token_ids) for c in ours.choices)
