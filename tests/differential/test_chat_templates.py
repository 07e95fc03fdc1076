"""A request's own chat template against vLLM's own server, both without --trust-request-chat-template:
the same refusal (status and error body) on each route vLLM checks it, and the same answer to a
`chat_template` of null in the kwargs (no template, so taken). With the flag, and the other chat-template
flags, on our server: tests/server/test_chat_template_flags.py.

Raw HTTP (httpx), to compare the error bodies whole.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.conftest import Pair
from tests.differential.test_small_routes import as_json, assert_same_error, post_both

HI: list[Any] = [{"role": "user", "content": "Hi"}]
OWN = "{{ messages | length }}"

# (id, path, body)
REFUSED: list[tuple[str, str, dict[str, Any]]] = [
    (
        "chat",
        "/v1/chat/completions",
        {"model": "tiny", "messages": HI, "max_tokens": 2, "chat_template": OWN},
    ),
    (
        "chat-kwargs",
        "/v1/chat/completions",
        {"model": "tiny", "messages": HI, "max_tokens": 2, "chat_template_kwargs": {"chat_template": OWN}},
    ),
    ("tokenize", "/tokenize", {"model": "tiny", "messages": HI, "chat_template": OWN}),
    (
        "tokenize-kwargs",
        "/tokenize",
        {"model": "tiny", "messages": HI, "chat_template_kwargs": {"chat_template": OWN}},
    ),
    (
        "responses-kwargs",
        "/v1/responses",
        {
            "model": "tiny",
            "input": "Hi",
            "max_output_tokens": 2,
            "chat_template_kwargs": {"chat_template": OWN},
        },
    ),
    (
        "anthropic-kwargs",
        "/v1/messages",
        {"model": "tiny", "messages": HI, "max_tokens": 2, "chat_template_kwargs": {"chat_template": OWN}},
    ),
]


@pytest.mark.parametrize(("case", "path", "body"), REFUSED, ids=[c for c, _, _ in REFUSED])
async def test_a_requests_template_is_refused_as_vllm_refuses_it(
    case: str, path: str, body: dict[str, Any], pair: Pair
) -> None:
    theirs, ours = await post_both(pair, path, as_json(body))
    assert theirs.status_code == 400, theirs.text
    assert_same_error(theirs, ours)


async def test_a_null_template_in_the_kwargs_is_taken(pair: Pair) -> None:
    body = {"model": "tiny", "messages": HI, "chat_template_kwargs": {"chat_template": None}}
    theirs, ours = await post_both(pair, "/tokenize", as_json(body))
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200 and ours.json() == theirs.json(), (theirs.text, ours.text)
