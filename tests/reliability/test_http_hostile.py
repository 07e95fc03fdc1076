"""Hostile HTTP bodies at a router (→ RemoteLlm → worker) and at the worker itself, over a MockLlm.

Every case gets a typed 4xx with an OpenAI-style body and no stack trace; the server stays up (a valid
request afterwards succeeds) and the engine is left with no request in flight.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cluster import Cluster, no_engine_work
from tests.support.servers import RunningServer

COMPLETION: dict[str, Any] = {"model": "tiny", "prompt": "hello", "max_tokens": 4}
CHAT: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
CMPL, CHATP = "/v1/completions", "/v1/chat/completions"


def _nested(field: str, depth: int) -> bytes:
    return b'{"model":"tiny","prompt":"x","max_tokens":2,"%s":{"a":%s%s}}' % (
        field.encode(),
        b"[" * depth,
        b"]" * depth,
    )


CASES: list[tuple[str, str, bytes | dict[str, Any], int]] = [
    ("malformed JSON", CMPL, b"{not json", 400),
    ("a JSON array", CMPL, b"[1, 2]", 400),
    ("an empty body", CMPL, b"", 400),
    ("NaN", CMPL, b'{"model":"tiny","prompt":"x","temperature":NaN}', 400),
    ("a number beyond float", CMPL, b'{"model":"tiny","prompt":"x","temperature":1e999}', 400),
    ("wrong type", CMPL, {**COMPLETION, "max_tokens": "many"}, 400),
    ("wrong prompt type", CMPL, {**COMPLETION, "prompt": {"a": 1}}, 400),
    ("max_tokens 10**30", CMPL, {**COMPLETION, "max_tokens": 10**30}, 400),
    ("max_tokens negative", CMPL, {**COMPLETION, "max_tokens": -5}, 400),
    ("temperature 1e308", CMPL, {**COMPLETION, "temperature": 1e308}, 400),
    ("n 10**9", CMPL, {**COMPLETION, "n": 10**9}, 400),
    ("logprobs 10**6", CMPL, {**COMPLETION, "logprobs": 10**6}, 400),
    ("prompt_logprobs 10**6", CMPL, {**COMPLETION, "prompt_logprobs": 10**6}, 400),
    ("min_tokens 10**12", CMPL, {**COMPLETION, "min_tokens": 10**12}, 400),
    ("stop token 2**64", CMPL, {**COMPLETION, "stop_token_ids": [2**64]}, 400),
    ("logit_bias key 10**20", CMPL, {**COMPLETION, "logit_bias": {str(10**20): 1.0}}, 400),
    ("prompt token 2**64", CMPL, {**COMPLETION, "prompt": [2**64]}, 400),
    ("prompt longer than the model", CMPL, {**COMPLETION, "prompt": "hello " * 3000}, 400),
    ("prompt ids longer than the model", CMPL, {**COMPLETION, "prompt": [5] * 600}, 400),
    ("unknown model", CMPL, {**COMPLETION, "model": "nope"}, 404),
    ("a body over the limit", CMPL, {**COMPLETION, "prompt": "x" * (2 << 20)}, 413),
    ("chat messages of the wrong type", CHATP, {**CHAT, "messages": "hi"}, 400),
    ("chat top_logprobs 10**6", CHATP, {**CHAT, "logprobs": True, "top_logprobs": 10**6}, 400),
    ("chat max_completion_tokens 10**30", CHATP, {**CHAT, "max_completion_tokens": 10**30}, 400),
    ("chat n 10**9", CHATP, {**CHAT, "n": 10**9}, 400),
    ("chat unknown model", CHATP, {**CHAT, "model": "nope"}, 404),
]

#: Values the wire cannot carry (ints beyond 64 bits): the text layer refuses the sampling ones, the
#: router's RemoteLlm the rest before sending; no mangled message reaches a worker.
WIRE_CASES: list[tuple[str, str, bytes | dict[str, Any], int]] = [
    ("seed 2**70", CMPL, {**COMPLETION, "seed": 2**70}, 400),
    ("seed 2**70, n 2", CMPL, {**COMPLETION, "seed": 2**70, "n": 2}, 400),
    ("seed 2**70, streamed", CMPL, {**COMPLETION, "seed": 2**70, "stream": True}, 400),
    ("priority -2**70", CMPL, {**COMPLETION, "priority": -(2**70)}, 400),
    ("top_k 2**70", CMPL, {**COMPLETION, "top_k": 2**70}, 400),
    ("kv_transfer_params 2**70", CMPL, {**COMPLETION, "kv_transfer_params": {"a": 2**70}}, 400),
    ("vllm_xargs 2**70", CMPL, {**COMPLETION, "vllm_xargs": {"a": 2**70}}, 400),
    ("chat seed 2**70", CHATP, {**CHAT, "seed": 2**70}, 400),
]

#: Nesting beyond msgspec's recursion limit: `vllm_server.http.openai.codec.decode_body` turns it into a 400.
DEEP_CASES: list[tuple[str, bytes]] = [
    ("100k nested lists in kv_transfer_params", _nested("kv_transfer_params", 100_000)),
    ("100k nested lists in vllm_xargs", _nested("vllm_xargs", 100_000)),
]


def _content(body: bytes | dict[str, Any]) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


async def _post(server: RunningServer, path: str, body: bytes | dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=server.base_url, timeout=30) as http:
        return await http.post(path, content=_content(body), headers={"content-type": "application/json"})


def assert_typed_error(response: httpx.Response, status: int) -> None:
    """An OpenAI-style error body with the given status, and nothing of a stack trace."""
    assert response.status_code == status, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == status
    assert isinstance(error["message"], str) and error["message"]
    # an OpenAI error class, or the status phrase where vLLM's validation handler types it so ("Bad Request")
    assert error["type"].endswith("Error") or error["type"] == HTTPStatus(status).phrase, error["type"]
    for leak in ("Traceback", 'File "', "<class", "Unexpected"):
        assert leak not in response.text


async def assert_still_serves(cluster: Cluster, server: RunningServer) -> None:
    """A valid request succeeds afterwards, and the engine has no request in flight."""
    ok = await _post(server, CMPL, COMPLETION)
    assert ok.status_code == 200, ok.text[:300]
    assert ok.json()["choices"][0]["finish_reason"] == "length"
    await no_engine_work(cluster.mock)


@pytest.mark.parametrize("hop", ["router", "worker"])
@pytest.mark.parametrize(("name", "path", "body", "status"), CASES, ids=[c[0] for c in CASES])
async def test_hostile_body_gets_a_typed_4xx(
    hop: str, name: str, path: str, body: bytes | dict[str, Any], status: int, shared_cluster: Cluster
) -> None:
    server = shared_cluster.router if hop == "router" else shared_cluster.worker
    assert_typed_error(await _post(server, path, body), status)
    await assert_still_serves(shared_cluster, server)


@pytest.mark.parametrize(("name", "path", "body", "status"), WIRE_CASES, ids=[c[0] for c in WIRE_CASES])
async def test_values_the_wire_cannot_carry_get_a_400_at_the_router(
    name: str, path: str, body: bytes | dict[str, Any], status: int, shared_cluster: Cluster
) -> None:
    before = len(shared_cluster.mock.requests)
    response = await _post(shared_cluster.router, path, body)
    assert_typed_error(response, status)
    message = response.json()["error"]["message"]
    # refused by the router, not the worker: as the wire cannot carry it, or (seed, priority) as vLLM's
    # fields refuse a value out of int64 (pydantic's bound)
    bounds = ("cannot be sent", "64-bit", "than or equal to 9223372036854775807", "to -9223372036854775808")
    assert any(bound in message for bound in bounds), message
    assert len(shared_cluster.mock.requests) == before, "a mangled request reached the worker"
    await assert_still_serves(shared_cluster, shared_cluster.router)


@pytest.mark.parametrize("hop", ["router", "worker"])
@pytest.mark.parametrize(("name", "body"), DEEP_CASES, ids=[c[0] for c in DEEP_CASES])
async def test_deeply_nested_json_gets_a_400(
    hop: str, name: str, body: bytes, shared_cluster: Cluster
) -> None:
    server = shared_cluster.router if hop == "router" else shared_cluster.worker
    response = await _post(server, CMPL, body)
    assert_typed_error(response, 400)
    await assert_still_serves(shared_cluster, server)


# ---- property-based bodies ----------------------------------------------------------------------

_HUGE = st.sampled_from([2**63, 2**64, 2**70, -(2**63) - 1, 10**30, -(10**30)])
_INT = st.integers(-3, 8) | _HUGE
_FLOAT = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e308, -1e308, 5e-324])
_JSONISH = st.recursive(
    st.none() | st.booleans() | _INT | _FLOAT | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_PROMPT = st.one_of(
    st.text(max_size=20),
    st.lists(_INT, max_size=6),
    st.lists(st.text(max_size=5), max_size=3),
    _JSONISH,
)
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "model": st.sampled_from(["tiny", "nope", ""]) | _JSONISH,
    "max_tokens": _INT | _JSONISH,
    "n": _INT,
    "temperature": _FLOAT | _JSONISH,
    "top_p": _FLOAT,
    "top_k": _INT,
    "seed": _INT,
    "logprobs": _INT | st.booleans(),
    "prompt_logprobs": _INT,
    "stop": st.text(max_size=4) | st.lists(st.text(max_size=4), max_size=3) | _JSONISH,
    "stop_token_ids": st.lists(_INT, max_size=3),
    "logit_bias": st.dictionaries(st.text(max_size=4) | _INT.map(str), _FLOAT, max_size=2),
    "priority": _INT,
    "stream": st.booleans(),
    "echo": st.booleans(),
    "kv_transfer_params": _JSONISH,
    "cache_salt": st.text(max_size=6),
    "min_tokens": _INT,
    "ignore_eos": st.booleans() | _JSONISH,
}


@st.composite
def completion_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A completion body: a prompt and a random subset of fields, each with hostile or ordinary values."""
    names = draw(st.lists(st.sampled_from(sorted(_FIELDS)), unique=True, max_size=7))
    body = {name: draw(_FIELDS[name]) for name in names}
    body["prompt"] = draw(_PROMPT)
    return body


def _finishes_well(choices: list[dict[str, Any]]) -> None:
    assert choices, "a completion without choices"
    assert [c["index"] for c in choices] == list(range(len(choices)))
    for choice in choices:
        assert isinstance(choice["text"], str)
        assert choice["finish_reason"] in ("length", "stop"), choice


def assert_completion(body: dict[str, Any], data: dict[str, Any]) -> None:
    """An accepted body got a whole completion: every choice finished, the usage adds up."""
    assert data["object"] == "text_completion", data
    _finishes_well(data["choices"])
    usage = data["usage"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    if type(body.get("n")) is int:
        assert len(data["choices"]) % body["n"] == 0  # n choices per prompt
    if type(body.get("max_tokens")) is int:
        assert usage["completion_tokens"] <= body["max_tokens"] * len(data["choices"])


def assert_completion_stream(text: str) -> None:
    """An accepted streamed body got chunks of one completion, each choice finished, then [DONE]."""
    events = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]", text[-300:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks and all(c["object"] == "text_completion" for c in chunks), text[-300:]
    assert len({c["id"] for c in chunks}) == 1
    last: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            last[choice["index"]] = choice
    _finishes_well([last[i] for i in sorted(last)])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=completion_bodies())
async def test_fuzzed_completion_bodies(body: dict[str, Any], shared_cluster: Cluster) -> None:
    async with httpx.AsyncClient(base_url=shared_cluster.router.base_url, timeout=30) as http:
        response = await http.post(
            CMPL, content=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )
        if response.status_code == 200:
            if body.get("stream") is True:
                assert_completion_stream(response.text)
            else:
                assert_completion(body, response.json())
        else:
            assert response.status_code in (400, 404), (body, response.text[:300])
            assert_typed_error(response, response.status_code)
    await no_engine_work(shared_cluster.mock)


# ---- the session worker: the same bodies against a real engine core ------------------------------

ENGINE_CASES = [pytest.param(*c, id=c[0]) for c in CASES if c[3] != 413] + [
    pytest.param("seed 2**70", CMPL, {**COMPLETION, "seed": 2**70}, 400, id="seed 2**70"),
]


@pytest.mark.parametrize(("name", "path", "body", "status"), ENGINE_CASES)
async def test_hostile_body_at_the_engine_worker(
    name: str, path: str, body: bytes | dict[str, Any], status: int, worker: RunningServer, engine_llm: Any
) -> None:
    """The session worker (an EngineCoreLlm, never killed here): typed 4xx, and no request left in flight."""
    response = await _post(worker, path, body)
    assert_typed_error(response, status)
    assert engine_llm.num_in_flight == 0
