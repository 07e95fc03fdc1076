"""`vllm_llm.parsers.constraints.tool_constraint` equals what vLLM's own parser leaves in the request after
`adjust_request` (ParserManager's parser over the tiny tokenizer, as the parity harness builds it): the same
JSON schema or structural tag (compared as parsed JSON), the request left unchanged in the same cases, and
the same errors."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from tests.llm.parsers.parity import Vllm
from vllm_llm._errors import InvalidRequest
from vllm_llm.parsers.constraints import StrictLevel, tool_constraint
from vllm_llm.wire import StructuredOutputs

#: vLLM's tool parser name → the structural tag model of its class (None: forced calls are read as JSON).
PARSERS: dict[str, str | None] = {
    "hermes": "hermes",
    "llama3_json": "llama",
    "deepseek_v3": "deepseek_r1",
    "deepseek_v31": "deepseek_v3_1",
    "kimi_k2": "kimi",
    "glm45": "glm_4_7",
    "qwen3_coder": "qwen_3_coder",
    "jamba": None,
}

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer"},
            },
            "required": ["city"],
        },
    },
}
SEARCH: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "search",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {"type": "object", "properties": {"site": {"type": "string"}}},
                "limit": {"type": ["integer", "null"]},
                "exact": {"enum": [True, 3]},
            },
            "required": ["query"],
        },
    },
}
NO_PARAMS: dict[str, Any] = {"type": "function", "function": {"name": "now"}}


def _strict(tool: dict[str, Any], strict: bool = True) -> dict[str, Any]:
    tool = copy.deepcopy(tool)
    tool["function"]["strict"] = strict
    return tool


TOOL_SETS: dict[str, list[dict[str, Any]]] = {
    "loose": [WEATHER, SEARCH, NO_PARAMS],
    "strict": [_strict(WEATHER), _strict(SEARCH)],
    "mixed": [_strict(WEATHER), _strict(SEARCH, False), NO_PARAMS],
}
CHOICES: dict[str, Any] = {
    "none": "none",
    "auto": "auto",
    "required": "required",
    "named": {"type": "function", "function": {"name": "get_weather"}},
}
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer"],
}


@dataclass
class Case:
    parser: str
    tools: list[dict[str, Any]]
    tool_choice: Any
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None
    structured_outputs: dict[str, Any] | None = None
    strict_level: StrictLevel = "auto"


# ---- the two sides -----------------------------------------------------------------------------------


Outcome = tuple[str, Any]
"""("unchanged", None), ("json", schema), ("structural_tag", parsed tag) or ("error", (message, param))."""


class Oracle:
    """vLLM's parsers, adjust_request on a ChatCompletionRequest."""

    def __init__(self, vllm: Vllm) -> None:
        from vllm.entrypoints.openai.chat_completion.protocol import (
            ChatCompletionNamedFunction,
            ChatCompletionNamedToolChoiceParam,
            ChatCompletionRequest,
        )
        from vllm.exceptions import VLLMValidationError
        from vllm.parser.parser_manager import ParserManager
        from vllm.sampling_params import StructuredOutputsParams
        from vllm.tool_parsers.abstract_tool_parser import ToolParserManager

        self.vllm = vllm
        self.request_cls = ChatCompletionRequest
        self.named_choice = ChatCompletionNamedToolChoiceParam
        self.named_function = ChatCompletionNamedFunction
        self.validation_error = VLLMValidationError
        self.structured_outputs_cls = StructuredOutputsParams
        self.manager = ParserManager
        self.tool_parsers = ToolParserManager
        self._classes: dict[tuple[str, str], Any] = {}

    def tool_parser_class(self, name: str) -> Any:
        return self.tool_parsers.get_tool_parser(name)

    def outcome(self, case: Case) -> Outcome:
        key = (case.parser, case.strict_level)
        if key not in self._classes:
            self._classes[key] = self.manager.get_parser(
                tool_parser_name=case.parser,
                enable_auto_tools=True,
                tool_strict_level=case.strict_level,
                tokenizer=self.vllm.tokenizer,
            )
        cls = self._classes[key]
        body: dict[str, Any] = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": copy.deepcopy(case.tools),
        }
        named_missing = isinstance(case.tool_choice, dict) and case.tool_choice["function"]["name"] not in {
            t["function"]["name"] for t in case.tools
        }
        # Request validation refuses a named tool that is not in tools; set it after, to reach adjust_request.
        body["tool_choice"] = "required" if named_missing else case.tool_choice
        if case.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = case.parallel_tool_calls
        if case.response_format is not None:
            body["response_format"] = case.response_format
        request = self.request_cls.model_validate(body)
        if case.structured_outputs is not None:
            # Set after validation, which refuses a malformed structural tag before adjust_request.
            request.structured_outputs = self.structured_outputs_cls(**case.structured_outputs)
        if named_missing:
            request.tool_choice = self.named_choice(
                function=self.named_function(name=case.tool_choice["function"]["name"])
            )
        before = request.structured_outputs
        parser = cls(self.vllm.tokenizer, request.tools, chat_template_kwargs={})
        try:
            request = parser.adjust_request(request)
        except self.validation_error as e:
            return "error", (e.args[0], e.parameter)
        except ValueError as e:
            return "error", (str(e), None)
        if request.structured_outputs is before:
            return "unchanged", None
        assert request.response_format is None
        so = request.structured_outputs
        assert so is not None
        kinds = {
            name: getattr(so, name)
            for name in ("json", "regex", "choice", "grammar", "json_object", "structural_tag")
            if getattr(so, name) is not None
        }
        assert len(kinds) == 1, kinds
        assert not so.disable_any_whitespace and not so.disable_additional_properties
        assert so.whitespace_pattern is None
        kind, value = next(iter(kinds.items()))
        return kind, json.loads(value) if kind == "structural_tag" else value


def our_structured_outputs(case: Case) -> StructuredOutputs | None:
    """The wire constraint our server makes of the request's response_format / structured_outputs."""
    fields: dict[str, Any] = dict(case.structured_outputs or {})
    rf = case.response_format
    if rf is not None and rf["type"] == "json_schema":
        fields = {"json": rf["json_schema"]["schema"]}
    elif rf is not None and rf["type"] == "json_object":
        fields = {"json_object": True}
    return msgspec.convert(fields, StructuredOutputs) if fields else None


def our_outcome(case: Case, oracle: Oracle) -> Outcome:
    model = PARSERS[case.parser]
    vllm_class = oracle.tool_parser_class(case.parser)
    assert vllm_class.structural_tag_model == model
    given = our_structured_outputs(case)
    tools = copy.deepcopy(case.tools)
    try:
        result = tool_constraint(
            structural_tag_model=model,
            supports_required_and_named=vllm_class.supports_required_and_named,
            tools=tools,
            tool_choice=case.tool_choice,
            parallel_tool_calls=case.parallel_tool_calls,
            structured_outputs=given,
            strict_level=case.strict_level,
        )
    except InvalidRequest as e:
        return "error", (str(e), e.param)
    assert tools == case.tools, "the request's tools are left alone"
    if result is given:
        return "unchanged", None
    assert result is not None
    kinds = msgspec.structs.asdict(result)
    set_kinds = {k: v for k, v in kinds.items() if v not in (None, False)}
    assert len(set_kinds) == 1, set_kinds
    kind, value = next(iter(set_kinds.items()))
    return kind, json.loads(value) if kind == "structural_tag" else value


def _same(ours: Outcome, theirs: Outcome) -> None:
    if theirs[0] == "error" and ours[0] == "error":
        # vLLM's ValueErrors carry no parameter; ours name it.
        assert ours[1][0] == theirs[1][0]
        assert theirs[1][1] in (None, ours[1][1])
        assert ours[1][1] in ("tools", "tool_choice")
        return
    assert ours == theirs


@pytest.fixture(scope="session")
def oracle(vllm_parsers: Vllm) -> Oracle:
    return Oracle(vllm_parsers)


# ---- the matrix --------------------------------------------------------------------------------------

MATRIX = [
    pytest.param(
        Case(
            parser=parser,
            tools=tools,
            tool_choice=choice,
            parallel_tool_calls=parallel,
            response_format=(
                {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}}
                if with_format
                else None
            ),
        ),
        id=f"{parser}-{choice_id}-parallel_{parallel}-{tools_id}-{'format' if with_format else 'plain'}",
    )
    for parser in PARSERS
    for choice_id, choice in CHOICES.items()
    for parallel in (None, False)
    for tools_id, tools in TOOL_SETS.items()
    for with_format in (False, True)
]


@pytest.mark.parametrize("case", MATRIX)
def test_constraint_equals_vllm(case: Case, oracle: Oracle) -> None:
    _same(our_outcome(case, oracle), oracle.outcome(case))


LEVELS = [
    pytest.param(
        Case(parser=parser, tools=TOOL_SETS[tools_id], tool_choice=choice, strict_level=level),
        id=f"{parser}-{level}-{choice}-{tools_id}",
    )
    for parser in PARSERS
    for level in ("function", "parameter")
    for choice in ("auto", "required")
    for tools_id in ("loose", "mixed")
]


@pytest.mark.parametrize("case", LEVELS)
def test_strict_level_equals_vllm(case: Case, oracle: Oracle) -> None:
    _same(our_outcome(case, oracle), oracle.outcome(case))


# ---- the user's constraint beside auto tool calls ------------------------------------------------------

_USER_TAG = {
    "type": "structural_tag",
    "format": {
        "type": "triggered_tags",
        "triggers": ["<answer>"],
        "tags": [
            {
                "begin": "<answer>",
                "content": {"type": "json_schema", "json_schema": ANSWER_SCHEMA},
                "end": "</answer>",
            }
        ],
        "at_least_one": True,
    },
}
_LEGACY_TAG = {
    "type": "structural_tag",
    "structures": [{"begin": "<answer>", "schema": ANSWER_SCHEMA, "end": "</answer>"}],
    "triggers": ["<answer>"],
}
USER_CONSTRAINTS: dict[str, dict[str, Any]] = {
    "json_object": {"response_format": {"type": "json_object"}},
    "json_text": {"structured_outputs": {"json": json.dumps(ANSWER_SCHEMA)}},
    "json_unsupported": {
        "response_format": {
            "type": "json_schema",
            "json_schema": {
                "name": "n",
                "schema": {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 2}}},
            },
        }
    },
    "regex": {"structured_outputs": {"regex": r"(yes|no)\.?"}},
    "choice": {"structured_outputs": {"choice": ["yes", "no"]}},
    "ebnf": {"structured_outputs": {"grammar": 'root ::= "yes" | "no"'}},
    "structural_tag": {"structured_outputs": {"structural_tag": json.dumps(_USER_TAG)}},
    "legacy_structural_tag": {"structured_outputs": {"structural_tag": json.dumps(_LEGACY_TAG)}},
    "bad_structural_tag": {
        "structured_outputs": {
            "structural_tag": json.dumps({"type": "structural_tag", "format": {"type": "tag"}})
        }
    },
}
USER = [
    pytest.param(
        Case(
            parser=parser,
            tools=TOOL_SETS["strict"],
            tool_choice=choice,
            parallel_tool_calls=parallel,
            **extra,
        ),
        id=f"{parser}-{choice}-parallel_{parallel}-{name}",
    )
    for parser in ("hermes", "glm45", "kimi_k2", "jamba")
    for choice in ("auto", "required")
    for parallel in (None, False)
    for name, extra in USER_CONSTRAINTS.items()
]


@pytest.mark.parametrize("case", USER)
def test_user_constraint_equals_vllm(case: Case, oracle: Oracle) -> None:
    _same(our_outcome(case, oracle), oracle.outcome(case))


# ---- edges and errors --------------------------------------------------------------------------------


def _with_defs(tool: dict[str, Any], defs: Any) -> dict[str, Any]:
    tool = copy.deepcopy(tool)
    tool["function"]["parameters"]["$defs"] = defs
    return tool


_PLACE = {"type": "object", "properties": {"name": {"type": "string"}}}
_ONLY_DEFS = {
    "type": "function",
    "function": {"name": "only_defs", "parameters": {"$defs": {"Place": _PLACE}}},
}
_EMPTY_PARAMS = {"type": "function", "function": {"name": "empty", "parameters": {}}}
EDGES: dict[str, tuple[list[dict[str, Any]], Any]] = {
    "named_missing": ([WEATHER, SEARCH], {"type": "function", "function": {"name": "missing"}}),
    "named_duplicate": (
        [WEATHER, SEARCH, _strict(WEATHER)],
        {"type": "function", "function": {"name": "get_weather"}},
    ),
    "defs_conflict": (
        [_with_defs(WEATHER, {"Place": _PLACE}), _with_defs(SEARCH, {"Place": {"type": "string"}})],
        "required",
    ),
    "defs_not_object": ([WEATHER, _with_defs(SEARCH, ["Place"])], "required"),
    "defs_null": ([_with_defs(WEATHER, None)], "required"),
    "defs_shared": (
        [_with_defs(WEATHER, {"Place": _PLACE}), _with_defs(SEARCH, {"Place": _PLACE})],
        "required",
    ),
    "defs_only": ([_ONLY_DEFS, _EMPTY_PARAMS, NO_PARAMS], "required"),
    "defs_named": (
        [_with_defs(WEATHER, {"Place": _PLACE}), SEARCH],
        {"type": "function", "function": {"name": "get_weather"}},
    ),
    "named_empty_params": ([_EMPTY_PARAMS, WEATHER], {"type": "function", "function": {"name": "empty"}}),
    "null_choice": ([WEATHER], None),
    "glm_shapes": (
        [
            {
                "type": "function",
                "function": {
                    "name": "shapes",
                    "parameters": {
                        "type": "object",
                        "properties": {
                            "one": {"enum": ["only"]},
                            "types": {"type": ["string", "number", "null"]},
                            "just_string": {"type": ["string"]},
                            "untyped": {},
                            "flag": {"type": "boolean"},
                        },
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "open",
                    "parameters": {
                        "type": "object",
                        "properties": {"a": {"type": "string"}},
                        "additionalProperties": True,
                    },
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "single",
                    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
                },
            },
            {
                "type": "function",
                "function": {"name": "composed", "parameters": {"anyOf": [{"type": "object"}]}},
            },
        ],
        "required",
    ),
}
EDGE_CASES = [
    pytest.param(Case(parser=parser, tools=tools, tool_choice=choice), id=f"{parser}-{name}")
    for name, (tools, choice) in EDGES.items()
    for parser in PARSERS
]


@pytest.mark.parametrize("case", EDGE_CASES)
def test_edge_equals_vllm(case: Case, oracle: Oracle) -> None:
    _same(our_outcome(case, oracle), oracle.outcome(case))


def test_errors_are_invalid_requests(oracle: Oracle) -> None:
    ours = our_outcome(Case(parser="jamba", tools=EDGES["defs_conflict"][0], tool_choice="required"), oracle)
    assert ours == (
        "error",
        ("Tool definition 'Place' has multiple schemas, which is not supported.", "tools"),
    )
    ours = our_outcome(Case(parser="hermes", tools=[WEATHER], tool_choice=EDGES["named_missing"][1]), oracle)
    assert ours == ("error", ("The tool with name 'missing' is not found in the tools list.", "tool_choice"))


def test_no_tools_leaves_the_constraint() -> None:
    given = StructuredOutputs(json=ANSWER_SCHEMA)
    no_tools: list[list[dict[str, Any]] | None] = [None, []]
    for tools in no_tools:
        assert (
            tool_constraint(
                structural_tag_model="hermes",
                supports_required_and_named=False,
                tools=tools,
                tool_choice="required",
                parallel_tool_calls=None,
                structured_outputs=given,
            )
            is given
        )
