"""Arguments typed by the tool's JSON schema (vLLM's `coerce_to_schema_type` and the engine's
`_fix_arg_types`), the one implementation the tagged formats (`_tagged.py`), Mistral's engine port
(`_mistral_calls.py`) and Kimi K2 use.

A value's schema types (`type`, `enum` values, `anyOf`/`oneOf`/`allOf`) are tried in a fixed order, null,
integer, number, boolean, object, array, string; the first that reads the text wins. Without a usable type the
text is read as JSON if it is (finite) JSON, else kept as a string. Nested objects and arrays are typed by
their `properties` and `items`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "coerce_text",
    "has_tool",
    "schema_types",
    "streamable_string_keys",
    "tool_properties",
    "typed_arguments",
]

_ORDER = ("null", "integer", "number", "boolean", "object", "array", "string")

#: Type names models and schemas use for the JSON Schema types (vLLM's table).
_ALIASES = {
    **dict.fromkeys(("str", "text", "varchar", "char", "enum"), "string"),
    **dict.fromkeys(
        ("int", "int32", "int64", "uint", "uint32", "uint64", "long", "short", "unsigned"), "integer"
    ),
    **dict.fromkeys(("float", "float32", "float64", "double"), "number"),
    "bool": "boolean",
    "dict": "object",
    **dict.fromkeys(("arr", "list", "sequence"), "array"),
}


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    function = tool.get("function")
    return function if isinstance(function, Mapping) else {}


def has_tool(tools: Sequence[Mapping[str, Any]], name: str) -> bool:
    """Whether a tool of the request is named `name`."""
    return any(_function(tool).get("name") == name for tool in tools)


def tool_properties(
    tools: Sequence[Mapping[str, Any]],
    name: str,
    *,
    bare_tools: bool = False,
    functions_only: bool = False,
) -> Mapping[str, Any]:
    """The `properties` of the first tool named `name` ({} when there is none).

    Per-format differences of vLLM's lookups: with `bare_tools` a tool without a `function` member is read
    as the function itself (the Mistral engine's `tool.get("function", tool)`); with `functions_only` tools
    whose `type` is not "function" are skipped (Kimi K2's engine).
    """
    for tool in tools:
        if functions_only and tool.get("type", "function") != "function":
            continue
        function = tool.get("function", tool) if bare_tools else tool.get("function")
        if not isinstance(function, Mapping) or function.get("name") != name:
            continue
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        return properties if isinstance(properties, Mapping) else {}
    return {}


def schema_types(schema: object) -> set[str]:
    """The JSON types a schema allows; {"string"} when it says nothing."""
    if not isinstance(schema, Mapping):
        return {"string"}
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(t for t in declared if isinstance(t, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        types.update(kind for kind in map(_json_type, enum) if kind)
    for key in ("anyOf", "oneOf", "allOf"):
        choices = schema.get(key)
        if isinstance(choices, list):
            for choice in choices:
                types |= schema_types(choice)
    return types or {"string"}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    for kind, name in ((float, "number"), (str, "string"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return ""


def streamable_string_keys(properties: Mapping[str, Any]) -> set[str] | None:
    """Keys whose values stay strings (their unfinished text may stream); None without a schema."""
    if not properties:
        return None
    return {key for key, schema in properties.items() if schema_types(schema) == {"string"}}


def _finite(value: object) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        return False
    return True


def _read_json(text: str) -> tuple[bool, object]:
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


def coerce_text(value: str, types: Iterable[str]) -> object:
    """`value` read as the first of `types` it fits (`value` itself, the same object, when kept)."""
    wanted = {_ALIASES.get(t, t) for t in (raw.strip().lower() for raw in types)}
    for kind in _ORDER:
        if kind not in wanted:
            continue
        if kind == "string":
            return value
        if kind == "null":
            if value.lower() == "null":
                return None
        elif kind == "integer":
            try:
                return int(value)
            except ValueError:
                pass
        elif kind == "number":
            try:
                number = float(value)
            except ValueError:
                continue
            if math.isfinite(number):
                return number if number != int(number) else int(number)
        elif kind == "boolean":
            word = value.lower().strip()
            if word in ("true", "1"):
                return True
            if word in ("false", "0"):
                return False
        else:
            ok, parsed = _read_json(value)
            if ok and _finite(parsed):
                return parsed
    ok, parsed = _read_json(value)
    return parsed if ok and _finite(parsed) else value


def _coerce(value: object, schema: Mapping[str, Any]) -> tuple[object, bool]:
    """`value` typed by `schema`, and whether that changed it."""
    if isinstance(value, str):
        typed = coerce_text(value, schema_types(schema))
        return (typed, True) if typed is not value else (value, False)
    if isinstance(value, dict):
        nested = schema.get("properties")
        return value, isinstance(nested, Mapping) and _coerce_members(value, nested)
    if isinstance(value, list):
        items = schema.get("items")
        changed = False
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                typed, item_changed = _coerce(item, items)
                if item_changed:
                    value[i] = typed
                    changed = True
        return value, changed
    typed = coerce_text(json.dumps(value, ensure_ascii=False), schema_types(schema))
    if type(typed) is not type(value) or typed != value:
        return typed, True
    return value, False


def _coerce_members(values: dict[str, object], properties: Mapping[str, Any]) -> bool:
    changed = False
    for key, value in values.items():
        schema = properties.get(key)
        if not isinstance(schema, Mapping):
            continue
        typed, value_changed = _coerce(value, schema)
        if value_changed:
            values[key] = typed
            changed = True
    return changed


def typed_arguments(arguments: str, properties: Mapping[str, Any]) -> str:
    """A JSON object of arguments with its values typed by `properties` (unchanged text when nothing
    changes or it is not a JSON object)."""
    if not properties:
        return arguments
    ok, parsed = _read_json(arguments)
    if not ok or not isinstance(parsed, dict):
        return arguments
    if _coerce_members(parsed, properties):
        return json.dumps(parsed, ensure_ascii=False)
    return arguments
