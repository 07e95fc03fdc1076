"""The forced tool choices (`vllm_llm.parsers.forced`) against vLLM's own code, without any tool parser:
`parse_required` against vLLM's validation of a `required` output (`TypeAdapter(list[FunctionDefinition])`,
arguments `json.dumps(parameters, ensure_ascii=False)`), and the streams against vLLM's
`extract_named_tool_call_streaming` / `extract_required_tool_call_streaming`, delta by delta, fed token by
token (`parity.token_steps`) and character by character."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.llm.parsers.parity import CORPUS_DIR, Vllm, token_steps
from vllm_llm.parsers import MessageDelta
from vllm_llm.parsers.forced import NamedCallStream, RequiredCallStream, parse_required
from vllm_llm.text._tokenizer import TextTokenizer

_RANDOM_ID = re.compile(r"^chatcmpl-tool-[0-9a-f]{16}$")

Step = tuple[tuple[int, str | None, str | None, str | None], ...] | None
"""One delta as (index, id, name, arguments) per tool call; None for no delta."""


def _corpus_texts(name: str) -> list[str]:
    data = json.loads((CORPUS_DIR / name).read_text(encoding="utf-8"))
    return [case["text"] for case in data["cases"]]


# Outputs of a `required` constraint and what can go wrong with them, beyond the corpus.
REQUIRED = [
    *_corpus_texts("forced-required.json"),
    '[{"name": "a", "parameters": {"x": 1}}]',
    '[{"name": "a", "parameters": {"x": 1, "y": 2, "x": 3}}]',
    '[{"name": "a", "name": "b", "parameters": {}}]',
    '[{"name": 1, "name": "b", "parameters": {}}]',
    '[{"name": "a", "parameters": {"x": 1}, "parameters": {"y": 2}}]',
    '[{"name": "a", "parameters": {"x": NaN, "y": Infinity, "z": -Infinity}}]',
    '[{"name": "a", "parameters": {"x": 1e400, "y": -0, "z": -0.0, "w": 1E+2}}]',
    '[{"name": "a", "parameters": {"x": 123456789012345678901234567890}}]',
    '[{"name": "a", "parameters": {"x": 0.1, "y": 12345678901234567890e-5, "z": 4.9e-325}}]',
    '[{"name": "a", "parameters": {"x": "\\ud800"}}]',
    '[{"name": "a", "parameters": {"x": "\\ude00"}}]',
    '[{"name": "a", "parameters": {"\\ud83d\\ude00": "\\uD83D\\uDE00"}}]',
    '[{"name": "a", "other": "\\udc00"}]',
    '[{"name": "a\\u0000b", "parameters": {"x": "\\/"}}]',
    '[{"name": "a", "parameters": {"x": "tab\there"}}]',
    '[{"name": "a", "parameters": {"x": "\\a"}}]',
    '[{"name": "a", "parameters": {"x": 01}}]',
    '[{"name": "a", "parameters": {"x": .5}}]',
    '[{"name": "a", "parameters": {"x": tru}}]',
    '[{"name": "a", "parameters": {"x": "\x7f\u2028"}}]',
    '[{"name": "a", "description": null, "strict": null, "defer_loading": null}]',
    '[{"name": "a", "description": 1}]',
    *(
        '[{"name": "a", "strict": ' + v + "}]"
        for v in ("true", "1", "0", "2", "-1", "-0", "1.0", "0.0", "-0.0", "1.5", "NaN", "1e0", "[]", "{}")
    ),
    *(
        '[{"name": "a", "defer_loading": "' + v + '"}]'
        for v in ("yes", "YES", "On", "off", "tRuE", "F", "n", "", " true", "2", "nope")
    ),
    '[{"name": "a"}, null]',
    "[null]",
    '[["a"]]',
    '["a", {"name": "a"}]',
    "null",
    "{}",
    '"text"',
    "[]x",
    " \t\r\n[ ]\n",
    "\ufeff[]",
    "\x0c[]",
    "\u00a0[]",
    '[{"n\\u0061me": "a", "p\\u0061rameters": {"x": 1}}]',
    '[{"name": "a\\"b", "parameters": {"q": "\\"}"}}]',
    '[{"name": "a\\x", "parameters": {"q": 1}}]',
    '[{"name": "a", "parameters": {"x": [1, {"y": [2, 3]}, "]}"]}}, {"name": "b", "parameters": {}}]',
    '[{"name": "a", "parameters": 5}]',
    '[{"name": "a", "parameters": true}]',
    '[{"name": "a", "parameters": {"x": 1}} {"name": "b", "parameters": {}}]',
    '[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}]]',
    '"pre" [{"name": "a", "parameters": {"x": 1}}]',
    'x[{"name": "a", "parameters": {"x": 1}}]',
    '{"name": "a", "parameters": {"x": 1}}, {"name": "b"}',
    '[{"name": "a", "parameters": {"x": 1}], {"name": "b", "parameters": {"y": 2}}]',
    '[{"name" "a", "parameters" {"x": 1}}, {"name":"b","parameters":{"y":2}}]',
    '[{"name": "a", "parameters": {"x": 1} , "name": "c"}]',
    '[{"name": "a", "parameters":{}},{"name":"b","parameters":{"s":"\u00e9\u4e2d\U0001f600"}}]',
    '[{"name": "a", "parameters": {"x": ' + "[" * 197 + "1" + "]" * 197 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + "[" * 198 + "1" + "]" * 198 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + "[" * 198 + "]" * 198 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + "[" * 199 + "]" * 199 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + '{"k": ' * 197 + "1" + "}" * 197 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + '{"k": ' * 198 + "1" + "}" * 198 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + "[" * 3000 + "]" * 3000 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + "9" * 4300 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + "9" * 4301 + "}}]",
    '[{"name": "a", "parameters": {"x": -' + "9" * 4300 + "}}]",
    '[{"name": "a", "parameters": {"x": -' + "9" * 4301 + "}}]",
    '[{"name": "a", "parameters": {"x": ' + "9" * 4300 + ".5e-3}}]",
    '[{"name": "a", "parameters": {"x": ' + "9" * 4301 + ".5}}]",
    '[{"name": "a", "parameters": {"x": ' + "9" * 4301 + "e-9}}]",
    '[{"name": "a", "parameters": {"x": 0.' + "0" * 5000 + "1}}]",
]

NAMED = [
    *_corpus_texts("forced-named.json"),
    '{"x": "\\ud800"}',
    "   ",
    '{"city": "Zürich 🏔️", "n": [1, 2, {"k": null}]}',
]


# ---- vLLM's side -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vllm_required() -> Callable[[str], list[tuple[str, str]]]:
    """vLLM's whole `required` path: validate, then dump each call's parameters."""
    from pydantic import TypeAdapter, ValidationError
    from vllm.entrypoints.generate.base.protocol import FunctionDefinition

    adapter = TypeAdapter(list[FunctionDefinition])

    def parse(content: str) -> list[tuple[str, str]]:
        try:
            calls = adapter.validate_json(content)
        except ValidationError:
            return []
        return [(c.name, json.dumps(c.parameters, ensure_ascii=False)) for c in calls]

    return parse


def _vllm_step(delta: Any) -> Step:
    if delta is None:
        return None
    assert delta.content is None and delta.reasoning is None
    return tuple(
        (
            c.index,
            _id(c.id),
            c.function.name if c.function else None,
            c.function.arguments if c.function else None,
        )
        for c in delta.tool_calls
    )


def _our_step(delta: MessageDelta | None) -> Step:
    if delta is None:
        return None
    assert delta.content is None and delta.reasoning is None
    return tuple((c.index, _id(c.id), c.name, c.arguments) for c in delta.tool_calls)


def _id(value: str | None) -> str | None:
    if value is None:
        return None
    assert _RANDOM_ID.match(value), value
    return "<random>"


def vllm_required_stream(pieces: list[str]) -> list[Step]:
    from vllm.tool_parsers.streaming import extract_required_tool_call_streaming

    steps: list[Step] = []
    previous = ""
    for piece in pieces:
        current = previous + piece
        delta, _ = extract_required_tool_call_streaming(
            previous_text=previous, current_text=current, tool_call_idx=None, tool_call_id_type="random"
        )
        steps.append(_vllm_step(delta))
        previous = current
    return steps


def vllm_named_stream(vllm: Vllm, name: str, pieces: list[str]) -> list[Step]:
    from vllm.tool_parsers.streaming import extract_named_tool_call_streaming

    steps: list[Step] = []
    returned = False
    for piece in pieces:
        delta, returned = extract_named_tool_call_streaming(
            delta_text=piece,
            function_name=name,
            function_name_returned=returned,
            tool_call_idx=None,
            tool_call_id_type="random",
            tokenizer=vllm.tokenizer,
        )
        steps.append(_vllm_step(delta))
    return steps


# ---- ours ------------------------------------------------------------------------------------------------


def our_required_stream(pieces: list[str]) -> list[Step]:
    stream = RequiredCallStream(index=0)
    return [_our_step(stream.feed(piece)) for piece in pieces]


def our_named_stream(name: str, pieces: list[str]) -> list[Step]:
    stream = NamedCallStream(name, index=0)
    return [_our_step(stream.feed(piece)) for piece in pieces]


def _splits(tokenizer: TextTokenizer, text: str) -> Iterator[list[str]]:
    yield [piece for piece, _ in token_steps(tokenizer, text)]
    yield list(text)
    yield [text]


# ---- tests -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", REQUIRED, ids=[f"required{i}" for i in range(len(REQUIRED))])
def test_parse_required_equals_vllm(text: str, vllm_required: Callable[[str], list[tuple[str, str]]]) -> None:
    ours = parse_required(text)
    assert all(call.id is None for call in ours)  # vLLM's whole path sets no id (but for kimi_k2 ids)
    assert [(c.name, c.arguments) for c in ours] == vllm_required(text)


def test_parse_required_equals_vllm_on_prefixes_and_mutations(
    vllm_required: Callable[[str], list[tuple[str, str]]],
) -> None:
    """Every prefix of a few outputs, and outputs with characters deleted, replaced or inserted."""
    rng = random.Random(8)
    seeds = [t for t in REQUIRED if t.startswith("[") and len(t) < 400]
    texts: list[str] = []
    for seed in seeds[:12]:
        texts.extend(seed[:n] for n in range(len(seed) + 1))
    alphabet = '[]{}",: \n\\0123456789.eE-+tfnaNIul\u00e9\U0001f600'
    for _ in range(3000):
        text = rng.choice(seeds)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            op = rng.randrange(3)
            if op == 0:
                text = text[:at] + text[at + 1 :]
            elif op == 1:
                text = text[:at] + rng.choice(alphabet) + text[at + 1 :]
            else:
                text = text[:at] + rng.choice(alphabet) + text[at:]
        texts.append(text)
    mismatches = [t for t in texts if [(c.name, c.arguments) for c in parse_required(t)] != vllm_required(t)]
    assert mismatches == []


_STREAMED = [t for t in REQUIRED if len(t) < 1000]  # vLLM rescans the whole text per step: keep it short


@pytest.mark.parametrize("text", _STREAMED, ids=[f"required{i}" for i in range(len(_STREAMED))])
def test_required_stream_equals_vllm(text: str, tokenizer: TextTokenizer) -> None:
    for pieces in _splits(tokenizer, text):
        assert our_required_stream(pieces) == vllm_required_stream(pieces), pieces


def test_required_stream_starting_empty_equals_vllm() -> None:
    pieces = ["", "", '[{"name": "a", ', "", '"parameters": {', '"x": 1}}', "", "]", ""]
    assert our_required_stream(pieces) == vllm_required_stream(pieces)


def test_required_stream_indexes_from_the_given_index() -> None:
    stream = RequiredCallStream(index=3)
    delta = stream.feed('[{"name": "a", "parameters": {}}, {"name": "b", "parameters": {"x"')
    assert delta is not None
    assert [(c.index, c.name, c.arguments) for c in delta.tool_calls] == [(3, "a", "{}"), (4, "b", '{"x"')]


@pytest.mark.parametrize("text", NAMED, ids=[f"named{i}" for i in range(len(NAMED))])
def test_named_stream_equals_vllm(text: str, tokenizer: TextTokenizer, vllm_parsers: Vllm) -> None:
    for pieces in [*_splits(tokenizer, text), ["", *list(text), ""]]:
        assert our_named_stream("get_weather", pieces) == vllm_named_stream(
            vllm_parsers, "get_weather", pieces
        ), pieces
