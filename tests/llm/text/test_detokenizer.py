"""Incremental detokenization, stop strings and logprob token strings against vLLM's own classes."""

from __future__ import annotations

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.quiet_import import quietly_import
from vllm_llm.text import TextTokenizer
from vllm_llm.text._detokenizer import IncrementalDetokenizer
from vllm_llm.text._logprobs import LogprobsProcessor
from vllm_llm.wire import LogprobRow

PROMPT = [1, 47, 76, 374, 86, 849, 336]


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir: Path) -> TextTokenizer:
    return TextTokenizer.from_dir(tiny_model_dir)


def token_streams() -> list[list[int]]:
    rng = random.Random(5)
    streams = [[rng.randrange(0, 1280) for _ in range(40)] for _ in range(6)]
    # Byte tokens (partial UTF-8), special tokens in a row, and ordinary words.
    streams.append([226, 128, 156, 5, 6, 7, 263, 131, 132, 300, 4, 4, 301])
    streams.append([16, 17, 18, 2, 3, 19, 20, 1, 1, 21])
    return streams


STOP_SETS: list[dict[str, Any]] = [
    {},
    {"stop": ["e"]},
    {"stop": ["e", " the", "ab"], "include_stop_str_in_output": True},
    {"stop": ["o", "or", "the"], "min_tokens": 5},
    {"skip_special_tokens": False},
    {"skip_special_tokens": False, "spaces_between_special_tokens": False},
    {"skip_special_tokens": False, "stop": ["<|user|>"]},
]


def vllm_detokenizer(vllm_tokenizer: Any, prompt: list[int], options: dict[str, Any]) -> Any:
    detok = quietly_import("vllm.v1.engine.detokenizer")
    sp = quietly_import("vllm.sampling_params").SamplingParams(max_tokens=100, **options)
    request = SimpleNamespace(request_id="r", prompt_token_ids=prompt, prompt_embeds=None, sampling_params=sp)
    return detok.IncrementalDetokenizer.from_new_request(vllm_tokenizer, request)


def ours(tokenizer: TextTokenizer, prompt: list[int], options: dict[str, Any]) -> IncrementalDetokenizer:
    return IncrementalDetokenizer(tokenizer, prompt, **options)


@pytest.mark.parametrize("options", STOP_SETS, ids=[str(o) for o in STOP_SETS])
@pytest.mark.parametrize("chunk", [1, 3])
def test_detokenizer_matches_vllm(
    options: dict[str, Any], chunk: int, tokenizer: TextTokenizer, vllm_tokenizer: Any
) -> None:
    for tokens in token_streams():
        theirs = vllm_detokenizer(vllm_tokenizer, PROMPT, options)
        mine = ours(tokenizer, PROMPT, options)
        assert type(theirs).__name__ == "FastIncrementalDetokenizer"
        for start in range(0, len(tokens), chunk):
            new = tokens[start : start + chunk]
            last = start + chunk >= len(tokens)
            stop_terminated = last and new[-1] in (2, 4)
            stop = theirs.update(list(new), stop_terminated)
            assert mine.update(new, stop_terminated) == stop
            finished = last or stop is not None
            assert mine.next_text(finished) == theirs.get_next_output_text(finished, True)
            assert mine.token_ids == theirs.output_token_ids
            assert mine.output_text == theirs.output_text
            if stop is not None:
                break


def test_stop_terminated_token_is_not_detokenized(tokenizer: TextTokenizer) -> None:
    mine = ours(tokenizer, PROMPT, {"skip_special_tokens": False})
    mine.update([16, 17, 4], stop_terminated=True)
    assert "<|eot|>" not in mine.output_text
    assert mine.token_ids == [16, 17, 4]
    shown = ours(tokenizer, PROMPT, {"skip_special_tokens": False, "include_stop_str_in_output": True})
    shown.update([16, 17, 4], stop_terminated=True)
    assert shown.output_text.endswith("<|eot|>")


def test_stop_string_held_back_until_finished(tokenizer: TextTokenizer) -> None:
    text_ids = tokenizer.encode(" the cat sees a dog", add_special_tokens=False)
    mine = ours(tokenizer, PROMPT, {"stop": ["a dog!!!"]})
    streamed = ""
    for t in text_ids:
        assert mine.update([t], stop_terminated=False) is None
        streamed += mine.next_text(finished=False)
    # Up to len("a dog!!!") - 1 = 7 chars are held back while they could begin a stop string.
    assert streamed == " the cat sees a dog"[:-7]
    assert streamed + mine.next_text(finished=True) == " the cat sees a dog"


def test_earliest_stop_string_wins(tokenizer: TextTokenizer) -> None:
    ids = tokenizer.encode(" the cat sees a dog", add_special_tokens=False)
    mine = ours(tokenizer, PROMPT, {"stop": ["dog", "cat", "sees"]})
    assert mine.update(ids, stop_terminated=False) == "cat"
    assert mine.output_text == " the "
    assert tokenizer.decode(mine.token_ids) == " the cat"


@pytest.mark.parametrize("options", [o for o in STOP_SETS if "stop" in o], ids=str)
@pytest.mark.parametrize("chunk", [1, 3])
def test_token_steps_are_the_deltas_without_stop_strings(
    options: dict[str, Any], chunk: int, tokenizer: TextTokenizer
) -> None:
    """While stop strings hold text back, the released steps are the (text, ids) deltas the same updates
    give without stop strings, each released once its text is (the last one cut at the stop string)."""
    plain_options = {k: v for k, v in options.items() if k not in ("stop", "include_stop_str_in_output")}
    for tokens in token_streams():
        mine = ours(tokenizer, PROMPT, options)
        plain = ours(tokenizer, PROMPT, plain_options)
        expected: list[tuple[str, list[int]]] = []
        steps: list[tuple[str, list[int]]] = []
        sent = ""
        for start in range(0, len(tokens), chunk):
            new = tokens[start : start + chunk]
            finished = start + chunk >= len(tokens)
            stop = mine.update(new, stop_terminated=False)
            plain.update(new, stop_terminated=False)
            expected.append((plain.next_text(False), new))
            finished = finished or stop is not None
            sent += mine.next_text(finished)
            released = mine.next_token_steps(finished)
            if mine.stop_buffer_length == 0:
                assert released is None
                break
            assert released is not None
            steps += released
            assert sent.startswith("".join(t for t, _ in steps))  # never ahead of the text
            if finished:
                break
        if mine.stop_buffer_length == 0:
            continue
        assert len(steps) == len(expected)
        assert steps[:-1] == expected[:-1]
        assert "".join(t for t, _ in steps) == mine.output_text
        assert [t for _, ids in steps for t in ids] == mine.token_ids


def test_a_token_held_back_in_part_is_held_back_whole(tokenizer: TextTokenizer) -> None:
    """`</think>` (one token) is released with its id only once all of its text is."""
    ids = tokenizer.encode("<think>Short.</think>Hello world, bye.", add_special_tokens=False)
    end_think = tokenizer.encode("</think>", add_special_tokens=False)
    assert len(end_think) == 1
    mine = ours(tokenizer, PROMPT, {"stop": ["world"]})
    for token in ids:
        stop = mine.update([token], stop_terminated=False)
        finished = stop is not None
        text = mine.next_text(finished)
        steps = mine.next_token_steps(finished)
        assert steps is not None
        for step_text, step_ids in steps:
            if step_ids == end_think:
                assert step_text == "</think>"
        if token == end_think[0]:
            assert text.endswith("</th")  # vLLM's delta: this text with the whole token's id
            assert all(step_ids != end_think for _, step_ids in steps)
        if finished:
            break
    assert mine.output_text == "<think>Short.</think>Hello "


def rows_for(rng: random.Random, n: int, k: int) -> list[tuple[list[int], list[float], int]]:
    rows = []
    for _ in range(n):
        ids = [rng.randrange(0, 1280) for _ in range(k + 1)]
        lps = sorted((-rng.random() * 5 for _ in range(k + 1)), reverse=True)
        rows.append((ids, lps, rng.randrange(1, 6)))
    # A sampled token that is also in the top-k.
    rows.append(([263, 131, 263], [-0.5, -0.4, -0.5], 2))
    return rows


@pytest.mark.parametrize("k", [0, 2, 5])
def test_logprob_tokens_match_vllm(k: int, tokenizer: TextTokenizer, vllm_tokenizer: Any) -> None:
    np = quietly_import("numpy")
    vlp = quietly_import("vllm.v1.engine.logprobs")
    outputs = quietly_import("vllm.v1.outputs")
    sp = quietly_import("vllm.sampling_params").SamplingParams(logprobs=k)
    request = SimpleNamespace(sampling_params=sp)
    theirs = vlp.LogprobsProcessor.from_new_request(vllm_tokenizer, request)
    mine = LogprobsProcessor(tokenizer, k)
    # Byte tokens first: their strings are completed with the preceding sampled tokens as context.
    rows = [([226, 5], [-0.1, -3.0], 1), ([128, 6], [-0.2, -2.0], 1), ([156, 7], [-0.3, -2.5], 1)]
    rows += rows_for(random.Random(k), 12, k)
    for ids, lps, rank in rows:
        ids, lps = ids[: k + 1], lps[: k + 1]
        lists = outputs.LogprobsLists(np.array([ids]), np.array([lps]), np.array([rank]))
        theirs._update_sample_logprobs(lists)
        (got,) = mine.sample([LogprobRow(token_ids=ids, logprobs=lps, rank=rank)])
        expected = [(tid, lp.logprob, lp.rank, lp.decoded_token) for tid, lp in theirs.logprobs[-1].items()]
        assert [(c.token_id, c.logprob, c.rank, c.token) for c in got.candidates] == expected
        assert (got.token_id, got.token) == (expected[0][0], expected[0][3])
    assert mine.cumulative_logprob == pytest.approx(theirs.cumulative_logprob)
