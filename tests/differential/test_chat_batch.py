"""`POST /v1/chat/completions/batch` (several conversations in one request) on our worker against vLLM's
own server: the same requests, the same answers and the same refusals."""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair
from tests.differential.test_small_routes import as_json, assert_same_error, post_both

PATH = "/v1/chat/completions/batch"
ALPHA: list[Any] = [{"role": "user", "content": "Reply with exactly the word: alpha"}]
BETA: list[Any] = [{"role": "user", "content": "Reply with exactly the word: beta"}]
GREEDY: dict[str, Any] = {"model": "tiny", "max_tokens": 8, "temperature": 0}

# (id, body): served by both, compared whole.
GOOD: list[tuple[str, dict[str, Any]]] = [
    ("two", {**GREEDY, "messages": [ALPHA, BETA]}),
    ("one", {**GREEDY, "messages": [ALPHA]}),
    ("three-with-a-repeat", {**GREEDY, "messages": [ALPHA, BETA, ALPHA]}),
    (
        "logprobs-and-token-ids",
        {**GREEDY, "messages": [ALPHA, BETA], "logprobs": True, "top_logprobs": 2, "return_token_ids": True},
    ),
    (
        "tokens-as-ids-and-logprob-token-ids",
        {
            **GREEDY,
            "messages": [ALPHA],
            "max_tokens": 2,
            "logprobs": True,
            "top_logprobs": 5,
            "logprob_token_ids": [100, 1000],
            "return_tokens_as_token_ids": True,
        },
    ),
    ("stop-string", {**GREEDY, "messages": [ALPHA, BETA], "stop": [" "], "include_stop_str_in_output": True}),
    # An assistant turn to continue, echoed as vLLM echoes it. One conversation only: echo asks for prompt
    # logprobs, and vLLM's CPU LoRA logits (these engines have LoRA slots) fail on prompt logprobs beside
    # another running request (`einsum(): subscript b has size 2 ... size 24` in bgmv_shrink), on vLLM's
    # server as on ours.
    (
        "echo",
        {
            **GREEDY,
            "messages": [[*BETA, {"role": "assistant", "content": "The word"}]],
            "echo": True,
            "add_generation_prompt": False,
            "continue_final_message": True,
        },
    ),
    # Fields vLLM's batch request does not declare reach each conversation's request (stop_token_ids),
    # except tools: they are not rendered.
    (
        "tools-not-rendered",
        {
            **GREEDY,
            "messages": [ALPHA, BETA],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        },
    ),
    ("stop-token-ids", {**GREEDY, "messages": [ALPHA, BETA], "stop_token_ids": [5, 6, 7, 8, 9, 10, 11, 12]}),
]

# (id, body): refused by both, with the same status and error body.
BAD: list[tuple[str, Any]] = [
    ("no-messages", {"model": "tiny"}),
    ("no-conversation", {"model": "tiny", "messages": []}),
    ("an-empty-conversation", {"model": "tiny", "messages": [ALPHA, []]}),
    ("a-conversation-not-a-list", {"model": "tiny", "messages": [ALPHA, "hi"]}),
    ("one-conversation-not-a-list-of-lists", {"model": "tiny", "messages": ALPHA}),
    ("n-above-1", {"model": "tiny", "messages": [ALPHA], "n": 2}),
    ("beam-search", {"model": "tiny", "messages": [ALPHA], "use_beam_search": True}),
    ("tool-choice-auto", {"model": "tiny", "messages": [ALPHA], "tool_choice": "auto"}),
    (
        "prompt-token-ids",
        {"model": "tiny", "messages": [ALPHA], "kv_transfer_params": {"prompt_token_ids": [1, 2]}},
    ),
    ("logprob-token-ids-without-logprobs", {"model": "tiny", "messages": [ALPHA], "logprob_token_ids": [5]}),
    ("bad-temperature", {"model": "tiny", "messages": [ALPHA], "temperature": "hot"}),
    ("unknown-model", {"model": "nope", "messages": [ALPHA]}),
    ("max-tokens-over", {"model": "tiny", "messages": [ALPHA, BETA], "max_tokens": 100_000}),
]


@pytest.mark.parametrize(("case", "body"), GOOD, ids=[c for c, _ in GOOD])
async def test_a_batch_is_answered_as_vllm_answers_it(case: str, body: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await post_both(pair, PATH, as_json(body))
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    want, got = theirs.json(), ours.json()
    assert len(got["choices"]) == len(body["messages"])
    assert got["id"].startswith("chatcmpl-")
    assert_same(want, got)


@pytest.mark.parametrize(("case", "body"), BAD, ids=[c for c, _ in BAD])
async def test_a_bad_batch_is_refused_as_vllm_refuses_it(case: str, body: Any, pair: Pair) -> None:
    theirs, ours = await post_both(pair, PATH, as_json(body))
    assert_same_error(theirs, ours)


async def test_a_streamed_batch_is_refused(pair: Pair) -> None:
    """vLLM's route is documented as not streaming, yet its server answers `stream: true` with each
    choice's last streamed delta only; ours refuses it."""
    body = {**GREEDY, "messages": [ALPHA, BETA]}
    theirs, ours = await post_both(pair, PATH, as_json({**body, "stream": True}))
    whole = await pair.ours_http.post(PATH, json=body)
    assert theirs.status_code == 200, theirs.text
    assert whole.status_code == 200, whole.text
    for truncated, full in zip(theirs.json()["choices"], whole.json()["choices"], strict=True):
        assert len(truncated["message"]["content"]) < len(full["message"]["content"])
        assert full["message"]["content"].endswith(truncated["message"]["content"])
    assert ours.status_code == 400, ours.text
    assert ours.json()["error"]["param"] == "stream"
    assert "do not support streaming" in ours.json()["error"]["message"]


async def test_each_conversation_is_its_own_engine_request(pair: Pair) -> None:
    """Conversation i's choice is what the same conversation gets alone from /v1/chat/completions."""
    body = {**GREEDY, "messages": [ALPHA, BETA]}
    batch = await pair.ours_http.post(PATH, json=body)
    assert batch.status_code == 200, batch.text
    for i, conversation in enumerate(body["messages"]):
        alone = await pair.ours_http.post("/v1/chat/completions", json={**GREEDY, "messages": conversation})
        assert alone.status_code == 200, alone.text
        assert batch.json()["choices"][i]["message"] == alone.json()["choices"][0]["message"]
