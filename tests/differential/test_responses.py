"""`/v1/responses` of our worker against vLLM's own server: the same greedy requests give the same response
objects (output text, status, usage, echoed fields), and streamed, the same event type sequence."""

from __future__ import annotations

from typing import Any

import pytest

from tests.differential.compare import assert_same
from tests.differential.conftest import Pair

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
IGNORE = frozenset({"created_at", "call_id", "item_id"})

CASES: list[tuple[str, dict[str, Any]]] = [
    ("string-input", {"input": "Tell me a story about a cat.", "max_output_tokens": 16}),
    (
        "items-and-instructions",
        {
            "instructions": "You are a helpful assistant.",
            "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
                {"role": "assistant", "content": "Hello!"},
                {"type": "message", "role": "user", "content": "Tell me a story."},
            ],
            "max_output_tokens": 12,
        },
    ),
    ("length", {"input": "Hi", "max_output_tokens": 4}),
    (
        "json-schema",
        {
            "input": "Hi",
            "max_output_tokens": 16,
            "text": {"format": {"type": "json_schema", "name": "x", "schema": SCHEMA}},
        },
    ),
    (
        "function-call-output",
        {
            "input": [
                {"role": "user", "content": "Weather in Paris?"},
                {"type": "function_call", "call_id": "call_1", "name": "w", "arguments": '{"c": "Paris"}'},
                {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            ],
            "tools": [{"type": "function", "name": "w", "parameters": {"type": "object"}}],
            "max_output_tokens": 8,
        },
    ),
]


async def _both(pair: Pair, body: dict[str, Any]) -> tuple[Any, Any]:
    request = {"model": "tiny", "temperature": 0, **body}
    theirs = await pair.theirs_http.post("/v1/responses", json=request)
    ours = await pair.ours_http.post("/v1/responses", json=request)
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    return theirs, ours


@pytest.mark.parametrize(("case", "body"), CASES, ids=[c for c, _ in CASES])
async def test_response(case: str, body: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await _both(pair, body)
    theirs_json, ours_json = theirs.json(), ours.json()
    assert theirs_json["output"], "the case produces something to compare"
    assert_same(theirs_json, ours_json, ignore=IGNORE)


def _events(text: str) -> list[tuple[str, dict[str, Any]]]:
    import json

    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def _coalesced(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    """The events with each run of deltas joined into one (vLLM's engine client merges the deltas a slow
    reader has not taken yet, so how many there are depends on timing; what they carry does not)."""
    out: list[tuple[str, Any]] = []
    for kind, data in events:
        if kind.endswith(".delta"):
            if out and out[-1][0] == kind:
                out[-1] = (kind, out[-1][1] + data["delta"])
            else:
                out.append((kind, data["delta"]))
        else:
            out.append((kind, {k: v for k, v in data.items() if k != "sequence_number"}))
    return out


@pytest.mark.parametrize(("case", "body"), CASES, ids=[c for c, _ in CASES])
async def test_stream(case: str, body: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await _both(pair, {**body, "stream": True})
    theirs_events, ours_events = _events(theirs.text), _events(ours.text)
    assert [data["sequence_number"] for _, data in ours_events] == list(range(len(ours_events)))
    theirs_seq, ours_seq = _coalesced(theirs_events), _coalesced(ours_events)
    assert [kind for kind, _ in ours_seq] == [kind for kind, _ in theirs_seq]
    for (kind, t), (_, o) in zip(theirs_seq, ours_seq, strict=True):
        assert_same(t, o, ignore=IGNORE, path=kind)


async def test_the_official_client_reads_the_same_text(pair: Pair) -> None:
    request: Any = {"model": "tiny", "temperature": 0, "input": "Hi", "max_output_tokens": 8}
    theirs = await pair.theirs.responses.create(**request)
    ours = await pair.ours.responses.create(**request)
    assert ours.output_text == theirs.output_text and ours.output_text
    assert ours.usage == theirs.usage
