"""Values of another JSON type where vLLM's pydantic request models (lax mode) take them:
`"max_tokens": "5"`, `"stream": "false"`, `"logprobs": "true"`. Sent as raw JSON to vLLM's server and
ours: the same status; accepted, the same greedy answer; refused, the same error type and param.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair

CMPL = "/v1/completions"
CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
HI: list[Any] = [{"role": "user", "content": "Hi"}]
PROMPT = "The quick brown fox"

#: What differs by construction between two servers' answers (Anthropic's message id).
VOLATILE = frozenset({"id"})

# (id, path, body); each body spells at least one field as another type than the one it declares.
CASES: list[tuple[str, str, dict[str, Any]]] = [
    # Completions: strings for ints, floats and bools, as pydantic reads them.
    ("max-tokens-str", CMPL, {"prompt": PROMPT, "max_tokens": "5", "temperature": 0}),
    ("temperature-str", CMPL, {"prompt": PROMPT, "max_tokens": 5, "temperature": "0.0"}),
    ("n-and-seed-str", CMPL, {"prompt": PROMPT, "max_tokens": 5, "n": "1", "seed": "3", "temperature": 0}),
    ("stream-false-str", CMPL, {"prompt": PROMPT, "max_tokens": 5, "stream": "false", "temperature": 0}),
    ("echo-yes", CMPL, {"prompt": PROMPT, "max_tokens": 3, "echo": "yes", "temperature": 0}),
    (
        "bools-off-and-0",
        CMPL,
        {"prompt": PROMPT, "max_tokens": 4, "echo": "off", "ignore_eos": 0, "temperature": 0},
    ),
    ("max-tokens-padded", CMPL, {"prompt": PROMPT, "max_tokens": " 4 ", "temperature": 0}),
    ("max-tokens-underscore", CMPL, {"prompt": PROMPT, "max_tokens": "1_0", "temperature": 0}),
    ("max-tokens-point-zero", CMPL, {"prompt": PROMPT, "max_tokens": "4.0", "temperature": 0}),
    ("max-tokens-float", CMPL, {"prompt": PROMPT, "max_tokens": 4.0, "temperature": 0}),
    ("max-tokens-true", CMPL, {"prompt": PROMPT, "max_tokens": True, "temperature": 0}),
    ("temperature-false", CMPL, {"prompt": PROMPT, "max_tokens": 4, "temperature": False}),
    ("min-tokens-str", CMPL, {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "min_tokens": "2"}),
    (
        "logit-bias-str",
        CMPL,
        {"prompt": PROMPT, "max_tokens": 4, "temperature": 0, "logit_bias": {"611": "-100"}},
    ),
    # Refused by pydantic's rules too.
    ("max-tokens-fraction", CMPL, {"prompt": PROMPT, "max_tokens": "4.5"}),
    ("max-tokens-exponent", CMPL, {"prompt": PROMPT, "max_tokens": "1e1"}),
    ("max-tokens-hex", CMPL, {"prompt": PROMPT, "max_tokens": "0x4"}),
    ("stream-padded", CMPL, {"prompt": PROMPT, "max_tokens": 4, "stream": " false", "temperature": 0}),
    ("stream-two", CMPL, {"prompt": PROMPT, "max_tokens": 4, "stream": 2}),
    ("model-number", CMPL, {"model": 5, "prompt": PROMPT, "max_tokens": 4}),
    # vLLM's check_logprobs reads logprobs before coercion: a string is refused, a bool passes.
    ("logprobs-str", CMPL, {"prompt": PROMPT, "max_tokens": 4, "logprobs": "2"}),
    ("prompt-logprobs-str", CMPL, {"prompt": PROMPT, "max_tokens": 4, "prompt_logprobs": "1"}),
    ("logprobs-true", CMPL, {"prompt": PROMPT, "max_tokens": 4, "logprobs": True, "temperature": 0}),
    # Chat.
    (
        "chat-logprobs-true-str",
        CHAT,
        {"messages": HI, "max_tokens": 4, "logprobs": "true", "top_logprobs": 2, "temperature": 0},
    ),
    ("chat-logprobs-1-str", CHAT, {"messages": HI, "max_tokens": 4, "logprobs": "1", "temperature": "0"}),
    ("chat-max-tokens-str", CHAT, {"messages": HI, "max_completion_tokens": "5", "temperature": 0}),
    ("chat-stream-no", CHAT, {"messages": HI, "max_tokens": 4, "stream": "no", "temperature": 0}),
    ("chat-top-logprobs-str", CHAT, {"messages": HI, "max_tokens": 4, "logprobs": True, "top_logprobs": "2"}),
    ("chat-max-tokens-word", CHAT, {"messages": HI, "max_tokens": "four"}),
    # Anthropic's messages.
    ("messages-max-tokens-str", MESSAGES, {"messages": HI, "max_tokens": "6", "temperature": "0"}),
    (
        "messages-stream-false-str",
        MESSAGES,
        {"messages": HI, "max_tokens": 4, "stream": "False", "temperature": 0},
    ),
    # Tokenizer routes.
    (
        "tokenize-bools-str",
        "/tokenize",
        {"prompt": PROMPT, "add_special_tokens": "false", "return_token_strs": "1"},
    ),
    ("detokenize-ids-str", "/detokenize", {"tokens": ["1", 286, "846"]}),
]


async def post_both(pair: Pair, path: str, body: dict[str, Any]) -> tuple[httpx.Response, httpx.Response]:
    """The same raw JSON body to vLLM's server and ours."""
    theirs = await pair.theirs_http.post(path, json=body)
    ours = await pair.ours_http.post(path, json=body)
    return theirs, ours


@pytest.mark.parametrize(("case", "path", "body"), CASES, ids=[c[0] for c in CASES])
async def test_lax_body(case: str, path: str, body: dict[str, Any], pair: Pair) -> None:
    body = {"model": "tiny", **body} if path not in ("/tokenize", "/detokenize") else body
    theirs, ours = await post_both(pair, path, body)
    assert ours.status_code == theirs.status_code, (theirs.text, ours.text)
    if theirs.status_code == 200:
        assert_same(theirs.json(), ours.json(), ignore=VOLATILE)
        return
    want, got = theirs.json()["error"], ours.json()["error"]
    assert (got["type"], got["param"], got["code"]) == (want["type"], want["param"], want["code"])
    assert got["message"] == want["message"]


async def _streamed_text(http: httpx.AsyncClient, body: dict[str, Any]) -> str:
    async with http.stream("POST", CMPL, json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line async for line in response.aiter_lines()]
    chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    return "".join(c["choices"][0]["text"] for c in chunks if c["choices"])


async def test_stream_true_as_a_string_streams(pair: Pair) -> None:
    body = {"model": "tiny", "prompt": PROMPT, "max_tokens": 6, "temperature": 0, "stream": "1"}
    theirs = await _streamed_text(pair.theirs_http, body)
    assert theirs
    assert await _streamed_text(pair.ours_http, body) == theirs
