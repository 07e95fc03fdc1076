"""`/v1/completions` of our worker against vLLM's own server: the same requests, the same answers."""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair

PROMPT = "The quick brown fox"

# (id, create() kwargs); vLLM's extra parameters go in extra_body, as a client of vLLM sends them.
CASES: list[tuple[str, dict[str, Any]]] = [
    ("length", {"max_tokens": 12, "extra_body": {"return_token_ids": True}}),
    ("logprobs", {"max_tokens": 8, "logprobs": 3}),
    ("token-prompt", {"prompt": [1, 286, 846, 284, 695], "max_tokens": 6}),
    ("batch", {"prompt": [PROMPT, "Hi"], "max_tokens": 5}),
    ("seeded-n2", {"temperature": 1.0, "seed": 7, "n": 2, "max_tokens": 6}),
    ("min-tokens", {"max_tokens": 8, "extra_body": {"min_tokens": 6, "ignore_eos": True}}),
    ("penalties", {"max_tokens": 10, "presence_penalty": 1.0, "frequency_penalty": 0.5}),
    ("repetition", {"max_tokens": 10, "extra_body": {"repetition_penalty": 1.3}}),
    ("logit-bias", {"max_tokens": 6, "logit_bias": {"611": -100}}),
    ("bad-words", {"max_tokens": 8, "extra_body": {"bad_words": ["can", " 1975"]}}),
    ("regex", {"max_tokens": 8, "extra_body": {"structured_outputs": {"regex": "[a-c]{3}[0-9]{2}"}}}),
    ("choice", {"max_tokens": 8, "extra_body": {"structured_outputs": {"choice": ["red", "green"]}}}),
    # echo's prompt_logprobs: test_echo_reports_prompt_logprobs.
    ("echo", {"max_tokens": 4, "echo": True, "logprobs": 1, "ignore": "prompt_logprobs"}),
]


async def both(pair: Pair, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same greedy completion from vLLM's server and ours, as JSON."""
    request: dict[str, Any] = {"model": "tiny", "prompt": PROMPT, "temperature": 0, **kwargs}
    theirs = await pair.theirs.completions.create(**request)
    ours = await pair.ours.completions.create(**request)
    return theirs.to_dict(), ours.to_dict()


@pytest.mark.parametrize(("case", "kwargs"), CASES, ids=[c for c, _ in CASES])
async def test_completion(case: str, kwargs: dict[str, Any], pair: Pair) -> None:
    kwargs = dict(kwargs)
    ignore = frozenset(filter(None, [kwargs.pop("ignore", None)]))
    theirs, ours = await both(pair, **kwargs)
    assert theirs["choices"][0]["text"]  # the case produces something to compare
    assert_same(theirs, ours, ignore=ignore)


async def greedy(pair: Pair, max_tokens: int = 12) -> dict[str, Any]:
    """vLLM's greedy choice for PROMPT, with its token ids (stop strings and ids are taken from it)."""
    theirs, _ = await both(pair, max_tokens=max_tokens, extra_body={"return_token_ids": True})
    choice: dict[str, Any] = theirs["choices"][0]
    return choice


@pytest.mark.parametrize("include", [False, True], ids=["stop-str-excluded", "stop-str-included"])
async def test_stop_string_from_the_output(include: bool, pair: Pair) -> None:
    text = (await greedy(pair))["text"]
    stop = text[len(text) // 2 :][:3]
    assert stop.strip(), text
    theirs, ours = await both(
        pair,
        max_tokens=12,
        stop=[stop, "never-in-output"],
        extra_body={"include_stop_str_in_output": include},
    )
    assert theirs["choices"][0]["finish_reason"] == "stop"
    assert theirs["choices"][0]["stop_reason"] == stop
    assert_same(theirs, ours)


async def test_stop_token_id_from_the_output(pair: Pair) -> None:
    token = (await greedy(pair))["token_ids"][3]
    theirs, ours = await both(pair, max_tokens=12, extra_body={"stop_token_ids": [token]})
    assert theirs["choices"][0]["stop_reason"] == token
    assert_same(theirs, ours)


async def stream_both(pair: Pair, **kwargs: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The chunks of the same streamed greedy completion from both servers, as JSON."""
    request: dict[str, Any] = {
        "model": "tiny",
        "prompt": PROMPT,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
        **kwargs,
    }
    return (
        [c.to_dict() async for c in await pair.theirs.completions.create(**request)],
        [c.to_dict() async for c in await pair.ours.completions.create(**request)],
    )


def summary(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client makes of a stream: per choice the text, tokens, logprobs, finish and stop reason."""
    choices: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for c in chunk["choices"]:
            mine = choices.setdefault(c["index"], {"text": "", "tokens": [], "token_logprobs": []})
            mine["text"] += c["text"]
            if c.get("logprobs"):
                mine["tokens"] += c["logprobs"]["tokens"]
                mine["token_logprobs"] += c["logprobs"]["token_logprobs"]
            if c.get("finish_reason") is not None:
                mine["finish_reason"] = c["finish_reason"]
                mine["stop_reason"] = c.get("stop_reason")
    last = chunks[-1]
    return {"choices": choices, "final_usage": last.get("usage"), "final_choices": last["choices"]}


@pytest.mark.parametrize(
    "kwargs",
    [{"max_tokens": 10, "logprobs": 2}, {"max_tokens": 5, "prompt": [PROMPT, "Hi"]}],
    ids=["logprobs", "batch"],
)
async def test_streaming(kwargs: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await stream_both(pair, **kwargs)
    assert summary(theirs)["final_usage"] is not None
    assert_same(summary(theirs), summary(ours))


async def test_streaming_stop_string_from_the_output(pair: Pair) -> None:
    text = (await greedy(pair))["text"]
    stop = text[len(text) // 2 :][:3]
    theirs, ours = await stream_both(pair, max_tokens=12, stop=[stop])
    assert summary(theirs)["choices"][0]["stop_reason"] == stop
    assert_same(summary(theirs), summary(ours))


async def test_echo_reports_prompt_logprobs(pair: Pair) -> None:
    theirs, ours = await both(pair, max_tokens=3, echo=True, logprobs=1)
    assert theirs["choices"][0]["prompt_logprobs"] is not None
    assert_same(theirs["choices"][0]["prompt_logprobs"], ours["choices"][0]["prompt_logprobs"])
