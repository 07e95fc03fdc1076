"""Bad requests to our worker and to vLLM's own server: the same HTTP status and OpenAI error type.

Raw HTTP (httpx), since the cases include bodies no OpenAI client would send.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.differential.conftest import Pair
from tests.support.engine import TINY_MAX_MODEL_LEN

CMPL = "/v1/completions"
CHAT = "/v1/chat/completions"
HI: list[Any] = [{"role": "user", "content": "Hi"}]

# (id, path, body, whether ours claims vLLM's wording: then the messages are equal, with the
# " (parameter=..., value=...)" vLLM's VLLMValidationError appends; test_messages_carry_the_parameter_suffix).
CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    ("unknown-model", CMPL, {"model": "nope", "prompt": "x", "max_tokens": 4}, True),
    ("unknown-model-chat", CHAT, {"model": "nope", "messages": HI, "max_tokens": 4}, True),
    ("max-tokens-over-context", CMPL, {"model": "tiny", "prompt": "x", "max_tokens": 100_000}, True),
    (
        "max-completion-tokens-over",
        CHAT,
        {"model": "tiny", "messages": HI, "max_completion_tokens": 600},
        True,
    ),
    (
        "prompt-too-long",
        CMPL,
        {"model": "tiny", "prompt": list(range(5, 5 + TINY_MAX_MODEL_LEN + 4)), "max_tokens": 4},
        True,
    ),
    ("no-prompt", CMPL, {"model": "tiny", "max_tokens": 4}, True),
    (
        "logprobs-below-minus-one",
        CMPL,
        {"model": "tiny", "prompt": "x", "max_tokens": 4, "logprobs": -2},
        True,
    ),
    ("top-logprobs-without-logprobs", CHAT, {"model": "tiny", "messages": HI, "top_logprobs": 2}, True),
    (
        "thinking-budget-without-reasoning-parser",
        CHAT,
        {"model": "tiny", "messages": HI, "max_tokens": 4, "thinking_token_budget": 8},
        True,
    ),
    (
        "named-tool-not-in-tools",
        CHAT,
        {
            "model": "tiny",
            "messages": HI,
            "tools": [{"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "b"}},
        },
        True,
    ),
    (
        "stream-options-without-stream",
        CMPL,
        {"model": "tiny", "prompt": "x", "stream_options": {"include_usage": True}},
        True,
    ),
    ("max-tokens-zero", CMPL, {"model": "tiny", "prompt": "x", "max_tokens": 0}, True),
    ("max-tokens-negative", CMPL, {"model": "tiny", "prompt": "x", "max_tokens": -1}, True),
    ("n-zero", CMPL, {"model": "tiny", "prompt": "x", "max_tokens": 4, "n": 0}, True),
    ("n-greedy", CMPL, {"model": "tiny", "prompt": "x", "max_tokens": 4, "n": 2, "temperature": 0}, True),
    ("logprobs-over-20", CMPL, {"model": "tiny", "prompt": "x", "max_tokens": 4, "logprobs": 21}, True),
    (
        "top-logprobs-over-20",
        CHAT,
        {"model": "tiny", "messages": HI, "max_tokens": 4, "logprobs": True, "top_logprobs": 21},
        True,
    ),
    ("temperature-negative", CMPL, {"model": "tiny", "prompt": "x", "temperature": -1}, True),
    ("top-p-zero", CMPL, {"model": "tiny", "prompt": "x", "top_p": 0}, True),
]

# Bodies that do not parse as the request type: vLLM answers them from FastAPI's validation handler.
MALFORMED: list[tuple[str, str, bytes]] = [
    ("not-json", CMPL, b"{not json"),
    ("cut-short", CMPL, b'{"model": "tiny", "prompt": '),
    ("not-an-object", CMPL, b"[1, 2]"),
    ("wrong-type", CMPL, b'{"model": "tiny", "prompt": "x", "max_tokens": "four"}'),
    ("int-with-fraction", CMPL, b'{"model": "tiny", "prompt": "x", "max_tokens": 4.5}'),
    ("float-as-word", CMPL, b'{"model": "tiny", "prompt": "x", "temperature": "hot"}'),
    ("bool-as-two", CMPL, b'{"model": "tiny", "prompt": "x", "stream": 2}'),
    ("bool-as-list", CMPL, b'{"model": "tiny", "prompt": "x", "echo": []}'),
    ("model-a-number", CMPL, b'{"model": 5, "prompt": "x"}'),
    (
        "stream-options-a-number",
        CMPL,
        b'{"model": "tiny", "prompt": "x", "stream": true, "stream_options": 5}',
    ),
    (
        "nested-bool",
        CMPL,
        b'{"model": "tiny", "prompt": "x", "stream": true, "stream_options": {"include_usage": "maybe"}}',
    ),
    ("messages-not-a-list", CHAT, b'{"model": "tiny", "messages": "Hi"}'),
    ("messages-missing", CHAT, b'{"model": "tiny", "max_tokens": 4}'),
    (
        "seed-as-word",
        CHAT,
        b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "seed": "x"}',
    ),
    # Chat: each kind of refusal (wrong type, missing field, out of range) as on completions.
    (
        "chat-wrong-type",
        CHAT,
        b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": "four"}',
    ),
    (
        "chat-float-as-word",
        CHAT,
        b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "temperature": "hot"}',
    ),
    ("chat-n-as-list", CHAT, b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "n": [1]}'),
    # Out of the ranges vLLM's pydantic fields declare (seed within int64, truncate_prompt_tokens >= -1).
    ("seed-over-int64", CMPL, b'{"model": "tiny", "prompt": "x", "seed": 9223372036854775808}'),
    ("seed-below-int64", CMPL, b'{"model": "tiny", "prompt": "x", "seed": -9223372036854775809}'),
    (
        "chat-seed-over-int64",
        CHAT,
        b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "seed": 9223372036854775808}',
    ),
    ("seed-over-int64-as-text", CMPL, b'{"model": "tiny", "prompt": "x", "seed": "9223372036854775808"}'),
    ("priority-below-int64", CMPL, b'{"model": "tiny", "prompt": "x", "priority": -9223372036854775809}'),
    ("stream-interval-zero", CMPL, b'{"model": "tiny", "prompt": "x", "stream_interval": 0}'),
    (
        "chat-routed-experts-prompt-start-negative",
        CHAT,
        b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], '
        b'"routed_experts_prompt_start": -1}',
    ),
    ("truncate-below-minus-one", CMPL, b'{"model": "tiny", "prompt": "x", "truncate_prompt_tokens": -2}'),
    (
        "chat-truncate-below-minus-one",
        CHAT,
        b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "truncate_prompt_tokens": -2}',
    ),
    (
        "unknown-enum-value",
        CHAT,
        b'{"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "reasoning_effort": "huge"}',
    ),
]


async def post_both(pair: Pair, path: str, body: bytes) -> tuple[httpx.Response, httpx.Response]:
    """The same POST to vLLM's server and ours."""
    headers = {"content-type": "application/json"}
    theirs = await pair.theirs_http.post(path, content=body, headers=headers)
    ours = await pair.ours_http.post(path, content=body, headers=headers)
    return theirs, ours


@pytest.mark.parametrize(("case", "path", "body", "wording"), CASES, ids=[c[0] for c in CASES])
async def test_error(case: str, path: str, body: dict[str, Any], wording: bool, pair: Pair) -> None:
    theirs, ours = await post_both(pair, path, httpx.Request("POST", "/", json=body).content)
    assert theirs.status_code >= 400, theirs.text
    assert ours.status_code == theirs.status_code, (theirs.text, ours.text)
    want, got = theirs.json()["error"], ours.json()["error"]
    assert got["type"] == want["type"]
    assert got["code"] == want["code"]
    if want["param"] is not None:
        assert got["param"] == want["param"]
    if wording:
        assert got["message"] == want["message"]


@pytest.mark.parametrize(("case", "path", "body"), MALFORMED, ids=[c[0] for c in MALFORMED])
async def test_malformed_body_status(case: str, path: str, body: bytes, pair: Pair) -> None:
    theirs, ours = await post_both(pair, path, body)
    assert theirs.status_code == 400, theirs.text
    assert ours.status_code == theirs.status_code, ours.text
    assert ours.json()["error"]["code"] == theirs.json()["error"]["code"]


@pytest.mark.parametrize(("case", "path", "body"), MALFORMED, ids=[c[0] for c in MALFORMED])
async def test_malformed_body_error(case: str, path: str, body: bytes, pair: Pair) -> None:
    """vLLM's validation handler's body: type "Bad Request", pydantic's error in the message, its
    location as the param."""
    theirs, ours = await post_both(pair, path, body)
    assert theirs.json()["error"]["type"] == "Bad Request", theirs.text
    assert ours.json() == theirs.json()


#: Messages no member of vLLM's union of message types takes: pydantic reports each member's error (11 and
#: 22 of them, the message type's class named in each location); ours reports the one msgspec meets.
UNION_MEMBERS: list[tuple[str, str, bytes]] = [
    ("message-role-missing", CHAT, b'{"model": "tiny", "messages": [{"content": "Hi"}]}'),
    ("message-content-a-number", CHAT, b'{"model": "tiny", "messages": [{"role": "user", "content": 5}]}'),
]


@pytest.mark.xfail(
    strict=True,
    raises=AssertionError,
    reason="pydantic words a message no member of vLLM's union takes as every member's error; ours as one",
)
@pytest.mark.parametrize(("case", "path", "body"), UNION_MEMBERS, ids=[c[0] for c in UNION_MEMBERS])
async def test_union_member_errors(case: str, path: str, body: bytes, pair: Pair) -> None:
    theirs, ours = await post_both(pair, path, body)
    assert (ours.status_code, ours.json()["error"]["type"]) == (
        theirs.status_code,
        theirs.json()["error"]["type"],
    )
    assert ours.json() == theirs.json()


@pytest.mark.parametrize("path", [CMPL, CHAT])
async def test_unknown_fields_are_accepted(path: str, pair: Pair) -> None:
    """vLLM's request models take fields they do not know (pydantic's extra="allow"), as ours."""
    known: dict[str, Any] = {"prompt": "x"} if path == CMPL else {"messages": HI}
    body = {"model": "tiny", **known, "max_tokens": 2, "temperature": 0, "no_such_field": {"a": [1]}}
    theirs, ours = await post_both(pair, path, httpx.Request("POST", "/", json=body).content)
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text


async def test_wrong_media_type_error(pair: Pair) -> None:
    headers = {"content-type": "text/plain"}
    theirs = await pair.theirs_http.post(CMPL, content=b'{"model": "tiny", "prompt": "x"}', headers=headers)
    ours = await pair.ours_http.post(CMPL, content=b'{"model": "tiny", "prompt": "x"}', headers=headers)
    assert theirs.status_code == 400, theirs.text
    assert (ours.status_code, ours.json()) == (theirs.status_code, theirs.json())


async def test_messages_carry_the_parameter_suffix(pair: Pair) -> None:
    """vLLM's VLLMValidationError ends its message with ` (parameter=..., value=...)`, ours too."""
    body = httpx.Request("POST", "/", json={"model": "tiny", "prompt": "x", "max_tokens": 100_000}).content
    theirs, ours = await post_both(pair, CMPL, body)
    assert ours.json()["error"]["message"] == theirs.json()["error"]["message"]
