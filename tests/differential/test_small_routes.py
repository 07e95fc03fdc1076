"""Small routes and messages of our worker against vLLM's own server: `/load`, `/version`, and the refusal
of a `logit_bias` whose keys are not token ids.

Raw HTTP (httpx): the cases include bodies no OpenAI client would send, and the routes are not OpenAI's.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.differential.compare import assert_same, without_vllm_suffix
from tests.differential.conftest import Pair

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
    """The same status and error body, vLLM's message without the parameter suffix it appends (see
    test_errors.py, test_messages_carry_the_parameter_suffix)."""
    assert theirs.status_code >= 400, theirs.text
    assert ours.status_code == theirs.status_code, (theirs.text, ours.text)
    want = theirs.json()
    want["error"]["message"] = without_vllm_suffix(want["error"]["message"])
    assert_same(want, ours.json())


# ---- GET /load, GET /version ---------------------------------------------------------------------------


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
