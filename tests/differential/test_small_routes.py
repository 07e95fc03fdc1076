"""Small routes and messages of our worker against vLLM's own server: `/invocations` (SageMaker), `/load`,
`/version`, and the refusal of a `logit_bias` whose keys are not token ids.

Raw HTTP (httpx): the cases include bodies no OpenAI client would send, and the routes are not OpenAI's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair
from tests.support.engine import TINY_MAX_MODEL_LEN

HI: list[Any] = [{"role": "user", "content": "Hi"}]
JSON = {"content-type": "application/json"}


async def post_both(
    pair: Pair, path: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[httpx.Response, httpx.Response]:
    """The same POST to vLLM's server and ours."""
    headers = JSON if headers is None else headers
    theirs = await pair.theirs_http.post(path, content=body, headers=headers)
    ours = await pair.ours_http.post(path, content=body, headers=headers)
    return theirs, ours


def as_json(body: Any) -> bytes:
    """`body` as the JSON bytes httpx sends."""
    return httpx.Request("POST", "/", json=body).content


def assert_same_error(theirs: httpx.Response, ours: httpx.Response) -> None:
    """The same status and error body (vLLM's message with the parameter suffix it appends, see
    test_errors.py, test_messages_carry_the_parameter_suffix)."""
    assert theirs.status_code >= 400, theirs.text
    assert ours.status_code == theirs.status_code, (theirs.text, ours.text)
    assert_same(theirs.json(), ours.json())


# ---- POST /invocations ---------------------------------------------------------------------------------

# (id, body): bodies that are a chat completion or a completion request, served as such.
GOOD: list[tuple[str, dict[str, Any]]] = [
    ("chat", {"model": "tiny", "messages": HI, "max_tokens": 6, "temperature": 0}),
    ("completion", {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 6, "temperature": 0}),
    # Both shapes at once: the chat request is tried first.
    ("chat-and-prompt", {"model": "tiny", "messages": HI, "prompt": "x", "max_tokens": 4, "temperature": 0}),
    # The body's model is not looked at (the adapter header names it, else the served model).
    ("chat-other-model", {"model": "nope", "messages": HI, "max_tokens": 4, "temperature": 0}),
    ("completion-no-model", {"prompt": "x", "max_tokens": 4, "temperature": 0}),
    # Not a chat request (messages is no list) but a completion request.
    (
        "bad-messages-and-prompt",
        {"model": "tiny", "messages": "Hi", "prompt": "x", "max_tokens": 4, "temperature": 0},
    ),
    (
        "completion-logprobs",
        {"model": "tiny", "prompt": "Hi", "max_tokens": 4, "temperature": 0, "logprobs": 2},
    ),
]

# (id, body): bodies that are neither request, and requests their own route refuses.
BAD: list[tuple[str, bytes]] = [
    ("empty-object", b"{}"),
    ("list", b"[1, 2]"),
    ("string", b'"x"'),
    ("number", b"5"),
    ("null", b"null"),
    ("not-json", b"{not json"),
    ("empty", b""),
    ("messages-not-a-list", as_json({"model": "tiny", "messages": "Hi"})),
    ("no-prompt", as_json({"model": "tiny", "max_tokens": 4})),
    ("empty-prompt", as_json({"model": "tiny", "prompt": "", "max_tokens": 4})),
    # A chat request failing its validators is no completion request either (it has no prompt).
    ("chat-top-logprobs-alone", as_json({"model": "tiny", "messages": HI, "top_logprobs": 2})),
    (
        "chat-stream-options-alone",
        as_json({"model": "tiny", "messages": HI, "stream_options": {"include_usage": True}}),
    ),
    ("completion-logprobs-below", as_json({"model": "tiny", "prompt": "x", "logprobs": -2})),
    # Requests refused once served: the route's own error.
    ("completion-max-tokens-over", as_json({"model": "tiny", "prompt": "x", "max_tokens": 100_000})),
    (
        "chat-max-tokens-over",
        as_json({"model": "tiny", "messages": HI, "max_tokens": TINY_MAX_MODEL_LEN * 2}),
    ),
]


@pytest.mark.parametrize(("case", "body"), GOOD, ids=[c for c, _ in GOOD])
async def test_invocations_serves(case: str, body: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await post_both(pair, "/invocations", as_json(body))
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    assert_same(theirs.json(), ours.json())


@pytest.mark.parametrize(("case", "body"), BAD, ids=[c for c, _ in BAD])
async def test_invocations_refuses(case: str, body: bytes, pair: Pair) -> None:
    theirs, ours = await post_both(pair, "/invocations", body)
    assert_same_error(theirs, ours)


@pytest.mark.parametrize(("adapter", "status"), [("tiny", 200), ("nope", 404)])
async def test_invocations_model_from_the_adapter_header(adapter: str, status: int, pair: Pair) -> None:
    body = as_json({"model": "ignored", "prompt": "x", "max_tokens": 4, "temperature": 0})
    headers = {**JSON, "X-Amzn-SageMaker-Adapter-Identifier": adapter}
    theirs, ours = await post_both(pair, "/invocations", body, headers=headers)
    assert theirs.status_code == status, theirs.text
    if status == 200:
        assert ours.status_code == 200, ours.text
        assert_same(theirs.json(), ours.json())
    else:
        assert_same_error(theirs, ours)


async def test_invocations_refuses_another_media_type(pair: Pair) -> None:
    body = as_json(GOOD[0][1])
    theirs, ours = await post_both(pair, "/invocations", body, headers={"content-type": "text/plain"})
    assert_same_error(theirs, ours)


# ---- GET /load, GET /version, SageMaker's /ping ---------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_ping(method: str, pair: Pair) -> None:
    """SageMaker's probe: vLLM's server answers it as /health (200, no body), on GET and on POST."""
    theirs = await pair.theirs_http.request(method, "/ping")
    ours = await pair.ours_http.request(method, "/ping")
    assert theirs.status_code == 200, theirs.text
    assert (ours.status_code, ours.content) == (theirs.status_code, theirs.content)


async def test_load_of_an_idle_server(pair: Pair) -> None:
    theirs, ours = await pair.theirs_http.get("/load"), await pair.ours_http.get("/load")
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    assert ours.json() == theirs.json()


async def test_version(pair: Pair) -> None:
    theirs, ours = await pair.theirs_http.get("/version"), await pair.ours_http.get("/version")
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    assert ours.json() == theirs.json()


# ---- logit_bias keys that are not token ids ------------------------------------------------------------

BIAS: list[tuple[str, str, dict[str, Any]]] = [
    ("completion", "/v1/completions", {"model": "tiny", "prompt": "x", "max_tokens": 4}),
    ("chat", "/v1/chat/completions", {"model": "tiny", "messages": HI, "max_tokens": 4}),
]


@pytest.mark.parametrize(("case", "path", "body"), BIAS, ids=[c for c, _, _ in BIAS])
async def test_logit_bias_names_every_bad_key(case: str, path: str, body: dict[str, Any], pair: Pair) -> None:
    bias = {"a": 1.0, "5": 2.0, "1.5": -1.0, "b": 0.5}
    theirs, ours = await post_both(pair, path, as_json({**body, "logit_bias": bias}))
    assert_same_error(theirs, ours)
