"""Prompt ids forwarded in `kv_transfer_params`, against vLLM's own server (neither runs a KV connector).

vLLM 0.32's decode stage takes `kv_transfer_params["prompt_token_ids"]` (a P/D proxy's copy of the prefill
response's `prompt_token_ids`) as the prompt of a chat request instead of rendering its messages: chat
completions, Responses, Anthropic messages and `/tokenize` with messages. Completions ignore them. Each case
below asks both servers the same thing; the messages say "Hi", the ids are another conversation's.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair
from tests.differential.test_chat import summary
from tests.support.engine import TINY_MAX_MODEL_LEN
from tests.support.engine_recorder import EngineRecorder

CHAT = "/v1/chat/completions"
HI: list[Any] = [{"role": "user", "content": "Hi"}]
STORY: list[Any] = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Tell me a story about a cat."},
]


async def story_ids(pair: Pair) -> list[int]:
    """The prompt ids of STORY, as a prefill worker (vLLM's) answers them."""
    r = await pair.theirs_http.post("/tokenize", json={"model": "tiny", "messages": STORY})
    ids: list[int] = r.json()["tokens"]
    return ids


def forwarding(ids: object, **body: Any) -> dict[str, Any]:
    """A greedy request body whose kv_transfer_params forward `ids`."""
    return {"model": "tiny", "temperature": 0, "kv_transfer_params": {"prompt_token_ids": ids}, **body}


async def post_both(pair: Pair, path: str, body: dict[str, Any]) -> tuple[httpx.Response, httpx.Response]:
    """`body` to vLLM's server and ours (each gets its own copy: vLLM's takes the ids out of its dict)."""
    theirs = await pair.theirs_http.post(path, json=json.loads(json.dumps(body)))
    ours = await pair.ours_http.post(path, json=json.loads(json.dumps(body)))
    return theirs, ours


async def same_json(pair: Pair, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """Both servers' JSON answers to `body`, asserted equal; vLLM's, returned."""
    theirs, ours = await post_both(pair, path, body)
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    assert_same(theirs.json(), ours.json())
    answer: dict[str, Any] = theirs.json()
    return answer


async def test_chat_answers_from_the_forwarded_ids(pair: Pair) -> None:
    ids = await story_ids(pair)
    rendered = await same_json(
        pair, CHAT, {"model": "tiny", "temperature": 0, "messages": STORY, "max_tokens": 8}
    )
    body = forwarding(ids, messages=HI, max_tokens=8, return_token_ids=True, return_prompt_text=True)
    theirs = await same_json(pair, CHAT, body)
    # the story's answer, not Hi's: the messages were not rendered
    assert theirs["choices"][0]["message"]["content"] == rendered["choices"][0]["message"]["content"]
    assert theirs["prompt_token_ids"] == ids
    assert theirs["prompt_text"] is None
    assert theirs["usage"]["prompt_tokens"] == len(ids)


async def test_chat_streams_from_the_forwarded_ids(pair: Pair) -> None:
    ids = await story_ids(pair)
    request: dict[str, Any] = {
        "model": "tiny",
        "messages": HI,
        "temperature": 0,
        "max_tokens": 8,
        "stream": True,
        "stream_options": {"include_usage": True},
        "extra_body": {"kv_transfer_params": {"prompt_token_ids": ids}},
    }
    theirs = [c.to_dict() async for c in await pair.theirs.chat.completions.create(**request)]
    ours = [c.to_dict() async for c in await pair.ours.chat.completions.create(**request)]
    assert summary(theirs)["final_usage"]["prompt_tokens"] == len(ids)
    assert_same(summary(theirs), summary(ours))


async def test_the_context_left_by_forwarded_ids_bounds_max_tokens(pair: Pair) -> None:
    theirs = await same_json(
        pair, CHAT, forwarding([5] * (TINY_MAX_MODEL_LEN - 2), messages=HI, max_tokens=100)
    )
    assert theirs["usage"]["completion_tokens"] == 2


async def test_the_engine_gets_the_transfer_params_without_the_ids(
    pair: Pair, engine_recorder: EngineRecorder
) -> None:
    ids = await story_ids(pair)
    body = forwarding(ids, messages=HI, max_tokens=2)
    body["kv_transfer_params"]["lease"] = "x"
    r = await pair.ours_http.post(CHAT, json=body, headers={"X-Request-Id": "kvp-rest"})
    assert r.status_code == 200, r.text
    received = engine_recorder.received_one("chatcmpl-kvp-rest")
    assert received.prompt_token_ids == ids
    assert received.sampling_params.extra_args == {"kv_transfer_params": {"lease": "x"}}
    r = await pair.ours_http.post(
        CHAT, json=forwarding(ids, messages=HI, max_tokens=2), headers={"X-Request-Id": "kvp-only"}
    )
    assert r.status_code == 200, r.text
    assert not (engine_recorder.received_one("chatcmpl-kvp-only").sampling_params.extra_args or {})


@pytest.mark.parametrize(
    ("ids", "extra"),
    [([5] * 9, {"echo": True}), ("x", {"echo": True}), (None, {})],
    ids=["echo-renders-the-messages", "echo-leaves-bad-ids-unchecked", "null-ids"],
)
async def test_forwarded_ids_are_ignored_where_vllm_renders(
    ids: object, extra: dict[str, Any], pair: Pair
) -> None:
    plain = {"model": "tiny", "temperature": 0, "messages": HI, "max_tokens": 6, **extra}
    rendered = await same_json(pair, CHAT, plain)
    theirs = await same_json(pair, CHAT, forwarding(ids, messages=HI, max_tokens=6, **extra))
    assert theirs["usage"] == rendered["usage"]


async def test_media_in_the_messages_leaves_bad_ids_unchecked(pair: Pair) -> None:
    # refused by both for the text-only model: the messages were rendered, the bad ids never checked
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "Hi"}, image]}]
    theirs, ours = await post_both(pair, CHAT, forwarding("x", messages=messages, max_tokens=4))
    assert theirs.status_code == ours.status_code == 400, (theirs.text, ours.text)
    assert "kv_transfer_params" not in theirs.text
    assert "kv_transfer_params" not in ours.text


async def test_completions_ignore_forwarded_ids(pair: Pair) -> None:
    ids = await story_ids(pair)
    plain = await same_json(
        pair, "/v1/completions", {"model": "tiny", "temperature": 0, "prompt": "Hi", "max_tokens": 8}
    )
    for forwarded in (ids, "x"):
        body = forwarding(forwarded, prompt="Hi", max_tokens=8, return_token_ids=True)
        theirs = await same_json(pair, "/v1/completions", body)
        assert theirs["choices"][0]["text"] == plain["choices"][0]["text"]
        assert theirs["choices"][0]["prompt_token_ids"] != ids


async def test_responses_messages_and_tokenize_take_the_forwarded_ids(pair: Pair) -> None:
    ids = await story_ids(pair)
    theirs, ours = await post_both(pair, "/v1/responses", forwarding(ids, input="Hi", max_output_tokens=8))
    assert theirs.status_code == ours.status_code == 200, (theirs.text, ours.text)
    assert_same(theirs.json()["usage"], ours.json()["usage"])
    assert_same(theirs.json()["output"][0]["content"], ours.json()["output"][0]["content"])
    assert theirs.json()["usage"]["input_tokens"] == len(ids)
    theirs_msg = await same_json(pair, "/v1/messages", forwarding(ids, messages=HI, max_tokens=8))
    assert theirs_msg["usage"]["input_tokens"] == len(ids)
    tokens = await same_json(
        pair, "/tokenize", {"model": "tiny", "messages": HI, "kv_transfer_params": {"prompt_token_ids": ids}}
    )
    assert tokens["tokens"] == ids


BAD_IDS: list[tuple[str, object]] = [
    ("string", "abc"),
    ("empty", []),
    ("float", [1.0, 2]),
    ("bool", [True, 2]),
    ("negative", [-1, 2]),
    ("object", {"a": 1}),
    ("out-of-vocabulary", [5, 100_000]),
    ("over-the-context", [5] * (TINY_MAX_MODEL_LEN + 88)),
    ("filling-the-context", [5] * TINY_MAX_MODEL_LEN),
]


@pytest.mark.parametrize(("case", "ids"), BAD_IDS, ids=[c for c, _ in BAD_IDS])
async def test_bad_forwarded_ids_are_refused_as_vllm_refuses_them(case: str, ids: object, pair: Pair) -> None:
    theirs, ours = await post_both(pair, CHAT, forwarding(ids, messages=HI, max_tokens=8))
    assert theirs.status_code == 400, theirs.text
    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json())


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (CHAT, {"messages": HI, "max_tokens": 4, "stream": True}),
        (CHAT, {"messages": HI, "max_tokens": 4, "truncate_prompt_tokens": TINY_MAX_MODEL_LEN + 1}),
        ("/v1/responses", {"input": "Hi", "max_output_tokens": 4}),
        ("/v1/messages", {"messages": HI, "max_tokens": 4}),
        ("/tokenize", {"messages": HI}),
    ],
    ids=["chat-stream", "chat-truncation", "responses", "messages", "tokenize"],
)
async def test_other_routes_refuse_bad_forwarded_ids_as_vllm(
    path: str, body: dict[str, Any], pair: Pair
) -> None:
    bad = [5, 100_000] if path == CHAT else "abc"
    theirs, ours = await post_both(pair, path, forwarding(bad, **body))
    assert theirs.status_code == 400, theirs.text
    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json())


@pytest.mark.parametrize("length", [TINY_MAX_MODEL_LEN + 88, TINY_MAX_MODEL_LEN], ids=["over", "filling"])
async def test_a_truncation_hiding_the_length_leaves_it_to_the_engine_check(length: int, pair: Pair) -> None:
    # truncate_prompt_tokens shortens what vLLM counts for max_tokens, not the ids its engine gets
    body = forwarding([5] * length, messages=HI, max_tokens=4, truncate_prompt_tokens=5)
    theirs, ours = await post_both(pair, CHAT, body)
    assert theirs.status_code == 400, theirs.text
    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json())
