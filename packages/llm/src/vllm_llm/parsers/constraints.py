"""The constraint that tools put on a chat request's output, as vLLM 0.32's `adjust_request` puts it.

vLLM constrains tool calls in one of two ways before the request reaches the engine:

* A tool parser with a `structural_tag_model` (vLLM's `DelegatingParser._apply_structural_tag`) gets an
  xgrammar *structural tag* in the model's own call syntax: for `required` and named choices always, for
  `auto` when a tool is `strict: true`, the server's `--tool-strict-level` is above `auto` (GLM's parser
  defaults to `function`) or `parallel_tool_calls` is false. Arguments follow the tool's schema when the tool
  is strict (or the level is `parameter`), and are any JSON otherwise. With `auto` and a user constraint
  (`response_format` / `structured_outputs`) the tag is "a tool call, or the user's constraint".
* Otherwise a parser that reads forced choices as JSON (`supports_required_and_named`) gets a JSON schema:
  the named tool's parameters, or for `required` a list of `{"name", "parameters"}` objects
  (vLLM's `get_json_schema_from_tools`).

The structural tags are built here as JSON equal to xgrammar's `StructuralTag.model_dump()` (every field,
defaults included) of the tags vLLM builds: xgrammar 0.2's builtin templates (`llama`, `kimi`, `deepseek_r1`,
`deepseek_v3_1`, `qwen_3_coder`, `glm_4_7` with only strict tools) and vLLM's own (`hermes`, `glm_4_7`
otherwise), always without the reasoning prefix (vLLM asks for `reasoning=False`).

Where vLLM asks xgrammar whether the user's constraint compiles (`_xgrammar_supports`), this module checks
what can be checked without xgrammar (JSON nesting, parseability, the schema features vLLM lists as
unsupported, structural-tag shape) and otherwise assumes it compiles. A Lark grammar cannot be converted to
EBNF without xgrammar, so with `auto` it is treated as a constraint the tag cannot join (the user's
constraint then applies alone, as vLLM does for constraints xgrammar rejects).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from vllm_llm._errors import InvalidRequest
from vllm_llm.wire import StructuredOutputs

__all__ = ["StrictLevel", "ToolChoiceSpec", "tool_constraint"]

StrictLevel: TypeAlias = Literal["auto", "function", "parameter"]
"""vLLM's `--tool-strict-level`."""

ToolChoiceSpec: TypeAlias = str | Mapping[str, Any] | None
"""`"none"`, `"auto"`, `"required"`, `{"type": "function", "function": {"name": ...}}`, or None (an explicit
null: no tool calling is forced or constrained)."""

Format: TypeAlias = dict[str, Any]
"""One xgrammar structural-tag format, as its `model_dump()`."""

_Choice: TypeAlias = Literal["auto", "required", "forced"]

_AUTO, _FUNCTION, _PARAMETER = 0, 1, 2
_LEVELS: dict[str, int] = {"auto": _AUTO, "function": _FUNCTION, "parameter": _PARAMETER}

#: The strict level a parser asks for when the server leaves the level at `auto` (vLLM's
#: `default_tool_strict_level`); by tag model, as every parser we ship with that model asks the same.
_DEFAULT_LEVELS: dict[str, int] = {"glm_4_7": _FUNCTION}


_UNCHANGED: Format = {}
"""Sentinel of `_tool_tag`: vLLM returns the request as it is, without the tool parser's adjustment."""


def tool_constraint(
    *,
    structural_tag_model: str | None,
    supports_required_and_named: bool,
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: ToolChoiceSpec,
    parallel_tool_calls: bool | None,
    structured_outputs: StructuredOutputs | None,
    strict_level: StrictLevel = "auto",
) -> StructuredOutputs | None:
    """The request's constraint once the tool parser adjusted it.

    Returns a new `StructuredOutputs` (a `structural_tag` or a `json` schema; it replaces the user's
    constraint, as vLLM also clears `response_format`), or `structured_outputs` itself when vLLM leaves the
    request unchanged. Raises `InvalidRequest` (param "tools" or "tool_choice") where vLLM rejects the tools.
    """
    if not tools:
        return structured_outputs
    tag = _tool_tag(
        structural_tag_model, tools, tool_choice, parallel_tool_calls, structured_outputs, strict_level
    )
    if tag is _UNCHANGED:
        return structured_outputs
    if tag is not None:
        return StructuredOutputs(structural_tag=json.dumps({"type": "structural_tag", "format": tag}))
    # The tool parser's own adjust_request (vLLM's ToolParser.adjust_request).
    if structured_outputs is not None and structured_outputs.structural_tag is not None:
        return structured_outputs
    if not supports_required_and_named:
        return structured_outputs
    schema = _json_schema_from_tools(tools, tool_choice, parallel_tool_calls)
    if schema is None:
        return structured_outputs
    return StructuredOutputs(json=schema)


def _tool_tag(
    model: str | None,
    tools: Sequence[Mapping[str, Any]],
    tool_choice: ToolChoiceSpec,
    parallel_tool_calls: bool | None,
    structured_outputs: StructuredOutputs | None,
    strict_level: StrictLevel,
) -> Format | None:
    """vLLM's `_apply_structural_tag`: the structural tag's format, None for no tag, or `_UNCHANGED`."""
    if not (tool_choice in ("auto", "required") or isinstance(tool_choice, Mapping)):
        return None
    is_auto = tool_choice == "auto"
    single_call = parallel_tool_calls is False
    level = _LEVELS[strict_level]
    if level == _AUTO and model is not None:
        level = _DEFAULT_LEVELS.get(model, level)
    if single_call and not (is_auto and structured_outputs is not None):
        # Limiting the call count needs the call envelope in the grammar.
        level = max(level, _FUNCTION)
    if model is None:
        return None
    functions = [_Function.of(tool) for tool in tools]
    if _pin_strictness(functions, tool_choice, level) is None:
        return None

    user_format: Format | None = None
    tag_choice = tool_choice
    if is_auto and structured_outputs is not None:
        if not _joinable(structured_outputs):
            return _UNCHANGED
        user_format = _user_format(structured_outputs)
        if user_format is not None:
            # A plain-text branch would make the user's constraint meaningless: the tools' branch must call.
            tag_choice = "required"

    tag = _model_tag(model, functions, tag_choice, level)
    if tag is None:
        return None
    if single_call:
        _stop_after_first_call(tag)
    if user_format is not None:
        return {"type": "or", "elements": [tag, user_format]}
    return tag


# ---- tools ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Function:
    """One request tool's function: name, description, parameters, and `strict` (pinned or as given)."""

    name: str
    description: str | None
    parameters: Any
    strict: bool | None

    @classmethod
    def of(cls, tool: Mapping[str, Any]) -> _Function:
        function: Mapping[str, Any] = tool["function"]
        strict = function.get("strict")
        return cls(
            name=function["name"],
            description=function.get("description"),
            parameters=function.get("parameters"),
            strict=strict if isinstance(strict, bool) else None,
        )

    def pinned(self, strict: bool) -> _Function:
        return _Function(self.name, self.description, self.parameters, strict)

    def argument_schema(self) -> Any:
        """The arguments' schema in a tag: any JSON (`true`) for a non-strict tool or missing parameters."""
        if self.strict is False or self.parameters is None:
            return True
        return self.parameters


def _pin_strictness(
    functions: list[_Function], tool_choice: ToolChoiceSpec, level: int
) -> list[_Function] | None:
    """vLLM's resolve_tool_strictness: None when no tag applies (`auto`, level `auto`, no strict tool);
    otherwise the tools with `strict` pinned (strict when the level is `parameter` or the tool says so)."""
    if tool_choice == "auto" and level == _AUTO and not any(f.strict is True for f in functions):
        return None
    return [f.pinned(level >= _PARAMETER or f.strict is True) for f in functions]


def _select(functions: list[_Function], tool_choice: ToolChoiceSpec) -> tuple[list[_Function], _Choice]:
    """xgrammar's normalize_tool_choice for function tools: the tools a tag covers and the simple choice."""
    if isinstance(tool_choice, Mapping):
        name = tool_choice["function"]["name"]
        selected = [f for f in functions if f.name == name]
        if not selected:
            raise InvalidRequest(
                f"The tool with name '{name}' is not found in the tools list.", param="tool_choice"
            )
        if len(selected) != 1:
            raise InvalidRequest("Forced tool choice must resolve to exactly one tool.", param="tool_choice")
        return selected, "forced"
    return functions, "required" if tool_choice == "required" else "auto"


def _model_tag(
    model: str, functions: list[_Function], tool_choice: ToolChoiceSpec, level: int
) -> Format | None:
    """vLLM's get_model_structural_tag (reasoning off): the tag's format in the model's call syntax."""
    build = _BUILDERS.get(model)
    if build is None:
        raise ValueError(f"Unknown format type: {model}, supported types: {sorted(_BUILDERS)}")
    pinned = _pin_strictness(functions, tool_choice, level)
    if pinned is None:
        return None
    selected, choice = _select(pinned, tool_choice)
    return build(selected, choice)


def _stop_after_first_call(node: Format) -> None:
    """vLLM's limit_to_single_tool_call: every list of calls in the tag stops after its first call."""
    if node.get("type") in ("triggered_tags", "token_triggered_tags", "tags_with_separator"):
        node["stop_after_first"] = True
    for key in ("content", "elements", "tags"):
        child = node.get(key)
        children = child if isinstance(child, list) else [child]
        for item in children:
            if isinstance(item, dict):
                _stop_after_first_call(item)


# ---- xgrammar formats (model_dump shapes, fields in declaration order) --------------------------------


def _const(value: str) -> Format:
    return {"type": "const_string", "value": value}


def _regex(pattern: str) -> Format:
    return {"type": "regex", "pattern": pattern}


def _json(schema: Any, style: str = "json") -> Format:
    return {
        "type": "json_schema",
        "json_schema": schema,
        "style": style,
        "any_order": False,
        "max_whitespace_cnt": None,
        "excludes": [],
    }


def _any_text(excludes: Sequence[str] = ()) -> Format:
    return {"type": "any_text", "excludes": list(excludes), "max_tokens": None, "max_chars": None}


def _sequence(elements: list[Format]) -> Format:
    return {"type": "sequence", "elements": elements}


def _or(elements: list[Format]) -> Format:
    return {"type": "or", "elements": elements}


def _star(content: Format) -> Format:
    return {"type": "star", "content": content}


def _tag(begin: str, content: Format, end: str) -> Format:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def _triggered(
    triggers: list[str], tags: list[Format], *, at_least_one: bool = False, excludes: Sequence[str] = ()
) -> Format:
    return {
        "type": "triggered_tags",
        "triggers": triggers,
        "tags": tags,
        "at_least_one": at_least_one,
        "stop_after_first": False,
        "excludes": list(excludes),
    }


def _separated(tags: list[Format], separator: str, *, stop_after_first: bool = False) -> Format:
    return {
        "type": "tags_with_separator",
        "tags": tags,
        "separator": separator,
        "at_least_one": True,
        "stop_after_first": stop_after_first,
    }


# ---- the models' call syntaxes ----------------------------------------------------------------------

_THINK = ["<think>", "</think>"]


def _hermes(functions: list[_Function], choice: _Choice) -> Format:
    """`<tool_call>\\n{"name": "NAME", "arguments": {...}}\\n</tool_call>`, with or without the newlines."""
    tags = [
        _tag(
            f'<tool_call>{newline}{{"name": "{f.name}", "arguments": ',
            _json(f.argument_schema()),
            f"}}{newline}</tool_call>",
        )
        for f in functions
        for newline in ("\n", "")
    ]
    if choice == "auto":
        return _triggered(["<tool_call>"], tags) if tags else _any_text()
    return _separated(tags, "", stop_after_first=choice == "forced")


def _llama(functions: list[_Function], choice: _Choice) -> Format:
    """`{"name": "NAME", "parameters": {...}}` (xgrammar's `llama`)."""
    tags = [_tag(f'{{"name": "{f.name}", "parameters": ', _json(f.argument_schema()), "}") for f in functions]
    if choice == "forced":
        return tags[0]
    if choice == "required":
        return _triggered(['{"name": '], tags, at_least_one=True, excludes=_THINK)
    return _triggered(['{"name": '], tags, excludes=_THINK) if tags else _any_text(_THINK)


_K2_SECTION_BEGIN, _K2_SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"


def _kimi(functions: list[_Function], choice: _Choice) -> Format:
    """`<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}
    <|tool_call_end|>...<|tool_calls_section_end|>` (xgrammar's `kimi`)."""
    tags = [
        _tag(
            f"<|tool_call_begin|>functions.{f.name}:",
            _sequence([_regex(r"\d+"), _const("<|tool_call_argument_begin|>"), _json(f.argument_schema())]),
            "<|tool_call_end|>",
        )
        for f in functions
    ]
    if choice == "forced":
        return _sequence([_const(_K2_SECTION_BEGIN), tags[0], _const(_K2_SECTION_END)])
    if choice == "required":
        return _sequence([_const(_K2_SECTION_BEGIN), _separated(tags, ""), _const(_K2_SECTION_END)])
    if not tags:
        return _any_text(_THINK)
    section = _tag(_K2_SECTION_BEGIN, _separated(tags, ""), _K2_SECTION_END)
    return _triggered([_K2_SECTION_BEGIN], [section], excludes=[*_THINK, "<|tool_call_begin|>"])


# DeepSeek's tokens: `<`, FULLWIDTH VERTICAL LINE, words joined by LOWER ONE EIGHTH BLOCK, the bar, `>`.
_DS_CALLS_BEGIN = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
_DS_CALLS_END = "<\uff5ctool\u2581calls\u2581end\uff5c>"
_DS_CALL_BEGIN = "<\uff5ctool\u2581call\u2581begin\uff5c>"
_DS_CALL_END = "<\uff5ctool\u2581call\u2581end\uff5c>"
_DS_SEP = "<\uff5ctool\u2581sep\uff5c>"


def _deepseek(
    functions: list[_Function], choice: _Choice, *, head: Callable[[str], str], tail: str, separator: str
) -> Format:
    """DeepSeek's calls section: CALLS_BEGIN, the calls (each `head(NAME)`, arguments, `tail`), CALLS_END;
    a forced call is one call inside the section."""
    if choice == "forced":
        f = functions[0]
        return _tag(_DS_CALLS_BEGIN + head(f.name), _json(f.argument_schema()), tail + _DS_CALLS_END)
    tags = [_tag(head(f.name), _json(f.argument_schema()), tail) for f in functions]
    if choice == "required":
        return _tag(_DS_CALLS_BEGIN, _separated(tags, separator), _DS_CALLS_END)
    if not tags:
        return _any_text(_THINK)
    section = _tag(_DS_CALLS_BEGIN, _separated(tags, separator), _DS_CALLS_END)
    return _triggered([_DS_CALLS_BEGIN], [section], excludes=_THINK)


def _deepseek_r1(functions: list[_Function], choice: _Choice) -> Format:
    """CALL_BEGIN `function` SEP NAME, the arguments in a json code block, CALL_END; calls separated by
    newlines (xgrammar's `deepseek_r1`; vLLM's DeepSeek-V3 parser)."""
    return _deepseek(
        functions,
        choice,
        head=lambda name: f"{_DS_CALL_BEGIN}function{_DS_SEP}{name}\n```json\n",
        tail=f"\n```{_DS_CALL_END}",
        separator="\n",
    )


def _deepseek_v3_1(functions: list[_Function], choice: _Choice) -> Format:
    """CALL_BEGIN NAME SEP, the arguments as JSON, CALL_END (xgrammar's `deepseek_v3_1`)."""
    return _deepseek(
        functions,
        choice,
        head=lambda name: f"{_DS_CALL_BEGIN}{name}{_DS_SEP}",
        tail=_DS_CALL_END,
        separator="",
    )


def _qwen_3_coder(functions: list[_Function], choice: _Choice) -> Format:
    """`<tool_call>\\n<function=NAME>\\n<parameter=K>V</parameter>...\\n</function>\\n</tool_call>`
    (xgrammar's `qwen_3_coder`)."""
    tags = [
        _tag(
            f"<tool_call>\n<function={f.name}>\n",
            _json(f.argument_schema(), "qwen_xml"),
            "\n</function>\n</tool_call>",
        )
        for f in functions
    ]
    if choice == "forced":
        return tags[0]
    trigger = ["<tool_call>\n<function="]
    if choice == "required":
        return _triggered(trigger, tags, at_least_one=True, excludes=_THINK)
    return _triggered(trigger, tags, excludes=_THINK) if tags else _any_text(_THINK)


_GLM_CONTROL = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
]
_GLM_TEXT_EXCLUDES = [token for token in _GLM_CONTROL if token != "<tool_call>"]


def _glm_4_7(functions: list[_Function], choice: _Choice) -> Format:
    """`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>...</tool_call>`: xgrammar's `glm_4_7`
    when every tool is strict, else vLLM's, where a non-strict tool's keys and basic value types are pinned
    (values are raw: strings verbatim, other types as JSON)."""
    if functions and all(f.strict for f in functions):
        tags = [
            _tag(f"<tool_call>{f.name}", _json(f.argument_schema(), "glm_xml"), "</tool_call>")
            for f in functions
        ]
        if choice == "forced":
            return tags[0]
        if choice == "required":
            return _triggered(["<tool_call>"], tags, at_least_one=True, excludes=_GLM_TEXT_EXCLUDES)
        return (
            _triggered(["<tool_call>"], tags, excludes=_GLM_TEXT_EXCLUDES)
            if tags
            else _any_text(_GLM_CONTROL)
        )
    tags = [_glm_strict_tag(f) if f.strict else _glm_shallow_tag(f) for f in functions]
    if choice == "auto":
        return _triggered(["<tool_call>"], tags, excludes=_GLM_TEXT_EXCLUDES)
    return _separated(tags, "", stop_after_first=choice == "forced")


def _glm_strict_tag(f: _Function) -> Format:
    schema = f.parameters if f.parameters is not None else True
    return _tag(f"<tool_call>{f.name}", _json(schema, "glm_xml"), "</tool_call>")


def _glm_shallow_tag(f: _Function) -> Format:
    properties = _glm_plain_properties(f.parameters or {})
    if properties is None:
        return _tag(f"<tool_call>{f.name}", _json(True, "glm_xml"), "</tool_call>")
    pairs = [
        _sequence([_const(f"<arg_key>{key}</arg_key><arg_value>"), _glm_value(prop), _const("</arg_value>")])
        for key, prop in properties.items()
    ]
    return _tag(f"<tool_call>{f.name}", _star(pairs[0] if len(pairs) == 1 else _or(pairs)), "</tool_call>")


def _glm_plain_properties(params: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The `properties` of a plain object schema (non-empty, closed to composition and patterns)."""
    properties = params.get("properties")
    if not isinstance(properties, Mapping) or not properties or params.get("additionalProperties") is True:
        return None
    if any(key in params for key in ("$ref", "allOf", "anyOf", "oneOf", "patternProperties")):
        return None
    return properties


def _glm_value(prop: Any) -> Format:
    """One argument value of a non-strict GLM call: an enum's values, a non-string type as JSON, or text."""
    prop = prop if isinstance(prop, Mapping) else {}
    if "enum" in prop:
        values = [_const(v if isinstance(v, str) else json.dumps(v)) for v in prop["enum"]]
        return values[0] if len(values) == 1 else _or(values)
    prop_type = prop.get("type")
    if isinstance(prop_type, list):
        formats = [_glm_value({"type": t}) for t in prop_type if t != "string"]
        if "string" in prop_type:
            formats.append(_any_text(_GLM_CONTROL))
        return formats[0] if len(formats) == 1 else _or(formats)
    if prop_type in (None, "string"):
        return _any_text(_GLM_CONTROL)
    return _json({"type": prop_type})


_BUILDERS: dict[str, Callable[[list[_Function], _Choice], Format]] = {
    "hermes": _hermes,
    "llama": _llama,
    "kimi": _kimi,
    "deepseek_r1": _deepseek_r1,
    "deepseek_v3_1": _deepseek_v3_1,
    "qwen_3_coder": _qwen_3_coder,
    "glm_4_7": _glm_4_7,
}


# ---- the user's constraint beside the tools (auto) ----------------------------------------------------

_MAX_NESTING = 64
_STRUCTURAL_TAG_EXTRA_NESTING = 16


def _joinable(so: StructuredOutputs) -> bool:
    """vLLM's _xgrammar_supports, as far as it can be told without xgrammar (see the module docstring)."""
    if so.regex and "\x00" in so.regex:
        return False
    if so.choice:
        return True
    if so.json:
        if _nests_deeper(so.json, _MAX_NESTING):
            return False
        schema = _loads(so.json) if isinstance(so.json, str) else so.json
        return isinstance(schema, dict) and not _has_unsupported_json_features(schema)
    if so.grammar:
        return not _is_lark(so.grammar)
    if so.structural_tag:
        if _nests_deeper(so.structural_tag, _MAX_NESTING + _STRUCTURAL_TAG_EXTRA_NESTING):
            return False
        return _structural_tag_format(so.structural_tag) is not None
    # An empty JSON schema or structural tag text does not parse (vLLM fails on it later).
    return so.json != "" and so.structural_tag != ""


def _user_format(so: StructuredOutputs) -> Format | None:
    """vLLM's structured_outputs_to_format: the user's constraint as a structural-tag format."""
    if so.json_object:
        return _json({"type": "object"})
    if so.json is not None:
        return _json(_loads(so.json) if isinstance(so.json, str) else so.json)
    if so.regex is not None:
        return _regex(so.regex)
    if so.choice is not None:
        return _or([_const(choice) for choice in so.choice])
    if so.grammar is not None:
        return {"type": "grammar", "grammar": so.grammar}
    if so.structural_tag is not None:
        return _structural_tag_format(so.structural_tag)
    return None


_NOT_JSON = object()


def _loads(text: str) -> Any:
    """`text` parsed, or `_NOT_JSON`."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _nests_deeper(spec: Any, limit: int) -> bool:
    """Whether objects and arrays nest deeper than `limit` (vLLM's check_json_nesting)."""
    if not spec:
        return False
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except RecursionError:
            return True
        except ValueError:
            return False
    level: list[Any] = [spec]
    for _ in range(limit):
        level = [
            child
            for node in level
            if isinstance(node, (dict, list))
            for child in (node.values() if isinstance(node, dict) else node)
            if isinstance(child, (dict, list))
        ]
        if not level:
            return False
    return True


def _is_lark(grammar: str) -> bool:
    """vLLM's grammar_is_likely_lark: no line defines a rule with `::=`."""
    for line in grammar.split("\n"):
        line = re.sub(r"(#|//).*$", "", line).strip()
        if line and "::=" in line:
            return False
    return True


_STRING_FORMATS = frozenset(
    {
        "email", "date", "time", "date-time", "duration", "ipv4", "ipv6", "hostname", "uuid", "uri",
        "uri-reference", "uri-template", "json-pointer", "relative-json-pointer",
    }
)  # fmt: skip


def _has_unsupported_json_features(schema: Any) -> bool:
    """vLLM's has_xgrammar_unsupported_json_features: JSON-schema features xgrammar does not enforce."""
    if not isinstance(schema, dict):
        return False
    raw_type = schema.get("type")
    types = (
        {raw_type}
        if isinstance(raw_type, str)
        else {t for t in raw_type if isinstance(t, str)}
        if isinstance(raw_type, list)
        else set()
    )
    bounded_pattern = _pattern_with_length_bounds(schema)
    if types & {"integer", "number"} and "multipleOf" in schema:
        return True
    if "array" in types and any(
        k in schema for k in ("uniqueItems", "contains", "minContains", "maxContains")
    ):
        return True
    if "string" in types and (
        ("format" in schema and schema["format"] not in _STRING_FORMATS) or bounded_pattern
    ):
        return True
    if "object" in types and "propertyNames" in schema:
        names = schema.get("propertyNames")
        if (isinstance(names, dict) and _pattern_with_length_bounds(names)) or any(
            k in schema for k in ("patternProperties", "properties")
        ):
            return True
        if schema.get("unevaluatedProperties", True) is not True:
            return True
    patterns = schema.get("patternProperties")
    if "object" in types and isinstance(patterns, dict) and ("properties" in schema or len(patterns) > 1):
        return True
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) >= 2:
        return True
    for value in schema.values():
        items = value if isinstance(value, list) else [value]
        if any(isinstance(item, dict) and _has_unsupported_json_features(item) for item in items):
            return True
    return False


def _pattern_with_length_bounds(schema: Mapping[str, Any]) -> bool:
    return ("pattern" in schema or "format" in schema) and ("minLength" in schema or "maxLength" in schema)


def _structural_tag_format(text: str) -> Format | None:
    """The format of a user's structural tag, validated and with defaults filled as xgrammar's pydantic
    models dump it (a legacy `{"structures", "triggers"}` tag becomes triggered tags); None if invalid."""
    tag = _loads(text)
    if not isinstance(tag, dict):
        return None
    if "structures" in tag:
        structures = tag["structures"]
        if not isinstance(structures, list) or not all(isinstance(s, dict) for s in structures):
            return None
        if (
            not all(key in s for s in structures for key in ("begin", "schema", "end"))
            or "triggers" not in tag
        ):
            return None
        legacy: Format = {
            "type": "triggered_tags",
            "triggers": tag["triggers"],
            "tags": [
                {
                    "type": "tag",
                    "begin": s["begin"],
                    "content": {"type": "json_schema", "json_schema": s["schema"]},
                    "end": s["end"],
                }
                for s in structures
            ],
        }
        return _validated_format(legacy)
    if tag.get("type", "structural_tag") != "structural_tag" or "format" not in tag:
        return None
    return _validated_format(tag["format"])


# xgrammar's structural-tag models (xgrammar/structural_tag.py) as field checks: each returns the field's
# dumped value or raises _Invalid. pydantic's lax coercions (e.g. "true" for a bool) are not accepted.


class _Invalid(Exception):
    pass


_Check: TypeAlias = Callable[[Any], Any]
_REQUIRED = object()


def _of(*types: type, pred: Callable[[Any], bool] = lambda _: True) -> _Check:
    def check(value: Any) -> Any:
        if isinstance(value, bool) and bool not in types:
            raise _Invalid
        if not isinstance(value, types) or not pred(value):
            raise _Invalid
        return value

    return check


def _list_of(item: _Check) -> _Check:
    def check(value: Any) -> Any:
        if not isinstance(value, list):
            raise _Invalid
        return [item(v) for v in value]

    return check


def _either(*checks: _Check) -> _Check:
    def check(value: Any) -> Any:
        for one in checks:
            try:
                return one(value)
            except _Invalid:
                pass
        raise _Invalid

    return check


def _model(fixed: str | None = None) -> _Check:
    """A format: `fixed` names the model of a TagFormat / TokenFormat field, else `type` picks it."""

    def check(value: Any) -> Format:
        if not isinstance(value, dict):
            raise _Invalid
        name = value.get("type", fixed)
        if name not in _MODELS or (fixed is not None and name != fixed):
            raise _Invalid
        dumped: Format = {"type": name}
        for field, field_check, default in _MODELS[name]:
            if field in value:
                dumped[field] = field_check(value[field])
            elif default is _REQUIRED:
                raise _Invalid
            else:
                dumped[field] = list(default) if isinstance(default, tuple) else default
        return dumped

    return check


def _rule(pattern: _Check) -> _Check:
    def check(value: Any) -> Any:
        if not isinstance(value, list) or len(value) != 2:
            raise _Invalid
        return [pattern(value[0]), _model()(value[1])]

    return check


_STR, _BOOL, _INT = _of(str), _of(bool), _of(int)
_OPT_INT = _either(_of(type(None)), _INT)
_OPT_COUNT = _either(_of(type(None)), _of(int, pred=lambda v: 0 <= v <= 2_147_483_647))
_STRS, _TOKEN = _list_of(_STR), _either(_INT, _STR)
_TOKENS, _FORMAT, _TAGS = _list_of(_TOKEN), _model(), _list_of(_model("tag"))
_STYLES = (
    "json", "qwen_xml", "minimax_xml", "minimax_m3_xml", "deepseek_xml", "glm_xml", "cohere_xml",
    "kimi_k3_xml", "deepseek_v4_1_xml",
)  # fmt: skip
_MODELS: dict[str, tuple[tuple[str, _Check, Any], ...]] = {
    "any_text": (("excludes", _STRS, ()), ("max_tokens", _OPT_COUNT, None), ("max_chars", _OPT_COUNT, None)),
    "const_string": (("value", _STR, _REQUIRED),),
    "json_schema": (
        ("json_schema", _of(bool, dict), _REQUIRED),
        ("style", _of(str, pred=lambda v: v in _STYLES), "json"),
        ("any_order", _BOOL, False),
        ("max_whitespace_cnt", _OPT_INT, None),
        ("excludes", _STRS, ()),
    ),
    "grammar": (("grammar", _STR, _REQUIRED),),
    "regex": (("pattern", _STR, _REQUIRED),),
    "qwen_xml_parameter": (("json_schema", _of(bool, dict), _REQUIRED),),
    "or": (("elements", _list_of(_FORMAT), _REQUIRED),),
    "sequence": (("elements", _list_of(_FORMAT), _REQUIRED),),
    "tag": (
        ("begin", _either(_STR, _model("token")), _REQUIRED),
        ("content", _FORMAT, _REQUIRED),
        ("end", _either(_STR, _STRS, _model("token")), _REQUIRED),
    ),
    "triggered_tags": (
        ("triggers", _STRS, _REQUIRED),
        ("tags", _TAGS, _REQUIRED),
        ("at_least_one", _BOOL, False),
        ("stop_after_first", _BOOL, False),
        ("excludes", _STRS, ()),
    ),
    "token_triggered_tags": (
        ("trigger_tokens", _TOKENS, _REQUIRED),
        ("tags", _TAGS, _REQUIRED),
        ("exclude_tokens", _TOKENS, ()),
        ("at_least_one", _BOOL, False),
        ("stop_after_first", _BOOL, False),
    ),
    "tags_with_separator": (
        ("tags", _TAGS, _REQUIRED),
        ("separator", _STR, _REQUIRED),
        ("at_least_one", _BOOL, False),
        ("stop_after_first", _BOOL, False),
    ),
    "optional": (("content", _FORMAT, _REQUIRED),),
    "plus": (("content", _FORMAT, _REQUIRED),),
    "star": (("content", _FORMAT, _REQUIRED),),
    "token": (("token", _TOKEN, _REQUIRED),),
    "exclude_token": (("exclude_tokens", _TOKENS, ()),),
    "any_tokens": (("exclude_tokens", _TOKENS, ()), ("max_tokens", _OPT_COUNT, None)),
    "repeat": (("min", _INT, _REQUIRED), ("max", _INT, _REQUIRED), ("content", _FORMAT, _REQUIRED)),
    "dispatch": (("rules", _list_of(_rule(_STR)), _REQUIRED), ("loop", _BOOL, True), ("excludes", _STRS, ())),
    "token_dispatch": (
        ("rules", _list_of(_rule(_TOKEN)), _REQUIRED),
        ("loop", _BOOL, True),
        ("exclude_tokens", _TOKENS, ()),
    ),
}


def _validated_format(value: Any) -> Format | None:
    try:
        dumped: Format = _FORMAT(value)
    except _Invalid:
        return None
    return dumped


# ---- JSON schema for parsers that read forced calls as JSON -------------------------------------------


def _json_schema_from_tools(
    tools: Sequence[Mapping[str, Any]], tool_choice: ToolChoiceSpec, parallel_tool_calls: bool | None
) -> Any:
    """vLLM's get_json_schema_from_tools: the named tool's parameters, or for `required` a non-empty list
    of `{"name", "parameters"}` (at most one when parallel calls are off); None for other choices."""
    if isinstance(tool_choice, Mapping):
        name = tool_choice["function"]["name"]
        by_name = {f.name: f for f in map(_Function.of, tools)}
        if name not in by_name:
            raise InvalidRequest(f"Tool '{name}' has not been passed in `tools`.", param="tool_choice")
        return _params_or_empty_object(by_name[name].parameters)
    if tool_choice != "required":
        return None
    functions = [_Function.of(tool) for tool in tools]
    defs: dict[str, Any] = {}
    alternatives = []
    for f in functions:
        params = f.parameters
        alternatives.append(
            {
                "properties": {
                    "name": {"type": "string", "enum": [f.name]},
                    # vLLM moves `$defs` to the top after choosing the empty-object default.
                    "parameters": _without_defs(params) if params else _params_or_empty_object(params),
                },
                "required": ["name", "parameters"],
            }
        )
    for f in functions:
        if f.parameters is None:
            continue
        tool_defs = f.parameters.get("$defs", {})
        if not isinstance(tool_defs, dict):
            raise InvalidRequest(
                f"`$defs` in the parameters of tool '{f.name}' must be an object, "
                f"got {type(tool_defs).__name__}.",
                param="tools",
            )
        for def_name, def_schema in tool_defs.items():
            if def_name in defs and defs[def_name] != def_schema:
                raise InvalidRequest(
                    f"Tool definition '{def_name}' has multiple schemas, which is not supported.",
                    param="tools",
                )
            defs[def_name] = def_schema
    schema: dict[str, Any] = {
        "type": "array",
        "minItems": 1,
        "items": {"type": "object", "anyOf": alternatives},
    }
    if parallel_tool_calls is False:
        schema["maxItems"] = 1
    if defs:
        schema["$defs"] = defs
    return schema


def _params_or_empty_object(params: Any) -> Any:
    return params if params else {"type": "object", "properties": {}}


def _without_defs(params: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in params.items() if key != "$defs"}
