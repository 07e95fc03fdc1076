"""Argument values corrected to the tool's JSON schema, as vLLM's ParserEngine does (`_fix_arg_types`,
with `vllm.tool_parsers.utils.coerce_to_schema_type`): a string whose property is typed e.g. `integer` becomes
that number, a number typed `string` becomes a string. Also which string properties may stream unfinished,
and the argument prefix that is safe to stream."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["fix_arg_types", "safe_arg_prefix", "streamable_string_keys", "tool_properties"]

_ALIASES = {
    "str": "string",
    "text": "string",
    "varchar": "string",
    "char": "string",
    "enum": "string",
    "int": "integer",
    "int32": "integer",
    "int64": "integer",
    "uint": "integer",
    "uint32": "integer",
    "uint64": "integer",
    "long": "integer",
    "short": "integer",
    "unsigned": "integer",
    "float": "number",
    "float32": "number",
    "float64": "number",
    "double": "number",
    "bool": "boolean",
    "dict": "object",
    "arr": "array",
    "list": "array",
    "sequence": "array",
}
_PRIORITY = ("null", "integer", "number", "boolean", "object", "array", "string")
_JSON_WS = " \t\n\r"


def tool_properties(tools: Sequence[Mapping[str, Any]], name: str) -> dict[str, Any]:
    """The `properties` of the named tool's parameters, or {}."""
    for tool in tools:
        function = tool.get("function", tool)
        if isinstance(function, Mapping) and function.get("name") == name:
            parameters = function.get("parameters")
            properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
            return properties if isinstance(properties, dict) else {}
    return {}


def _types(schema: Any) -> list[str]:
    """The JSON types a schema allows (`type`, `enum` values, `anyOf`/`oneOf`/`allOf`); else `string`."""
    if not isinstance(schema, dict):
        return ["string"]
    types: set[str] = set()
    declared = schema.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(t for t in declared if isinstance(t, str))
    enum = schema.get("enum")
    if isinstance(enum, list):
        for value in enum:
            types.add(_json_type(value))
    for key in ("anyOf", "oneOf", "allOf"):
        choices = schema.get(key)
        if isinstance(choices, list):
            for choice in choices:
                types.update(_types(choice))
    return list(types) if types else ["string"]


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


def _finite(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (ValueError, TypeError):
        return False
    return True


def _coerce_string(value: str, types: list[str]) -> Any:
    """`value` as the first of its types it parses as (null, integer, number, boolean, object, array,
    string); else as JSON; else unchanged (the same object)."""
    wanted = {_ALIASES.get(t.strip().lower(), t.strip().lower()) for t in types}
    for candidate in _PRIORITY:
        if candidate not in wanted:
            continue
        if candidate == "null":
            if value.lower() == "null":
                return None
        elif candidate == "string":
            return value
        elif candidate == "integer":
            try:
                return int(value)
            except (ValueError, TypeError):
                pass
        elif candidate == "number":
            try:
                number = float(value)
            except (ValueError, TypeError):
                continue
            if math.isfinite(number):
                return number if number != int(number) else int(number)
        elif candidate == "boolean":
            word = value.lower().strip()
            if word in ("true", "1"):
                return True
            if word in ("false", "0"):
                return False
        else:
            try:
                parsed = json.loads(value)
            except (ValueError, TypeError):
                continue
            if _finite(parsed):
                return parsed
    try:
        parsed = json.loads(value)
    except ValueError:
        return value
    return parsed if _finite(parsed) else value


def _coerce(value: Any, schema: dict[str, Any]) -> tuple[Any, bool]:
    """(value corrected to `schema`, whether it changed); objects and arrays are corrected in place."""
    if isinstance(value, str):
        coerced = _coerce_string(value, _types(schema))
        return (coerced, True) if coerced is not value else (value, False)
    if isinstance(value, dict):
        nested = schema.get("properties")
        return (value, _coerce_members(value, nested)) if isinstance(nested, dict) else (value, False)
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return value, False
        changed = False
        for i, item in enumerate(value):
            coerced, item_changed = _coerce(item, items)
            if item_changed:
                value[i] = coerced
                changed = True
        return value, changed
    coerced = _coerce_string(json.dumps(value, ensure_ascii=False), _types(schema))
    if type(coerced) is not type(value) or coerced != value:
        return coerced, True
    return value, False


def _coerce_members(args: dict[str, Any], properties: dict[str, Any]) -> bool:
    changed = False
    for key, value in args.items():
        schema = properties.get(key)
        if isinstance(schema, dict):
            coerced, member_changed = _coerce(value, schema)
            if member_changed:
                args[key] = coerced
                changed = True
    return changed


def fix_arg_types(args_json: str, name: str, tools: Sequence[Mapping[str, Any]]) -> str:
    """`args_json` with its values corrected to the named tool's schema, re-serialized only when a value
    changed (else unchanged, as is anything that is not a whole JSON object)."""
    if not tools or not name:
        return args_json
    try:
        args = json.loads(args_json)
    except ValueError:
        return args_json
    if not isinstance(args, dict):
        return args_json
    properties = tool_properties(tools, name)
    if not properties or not _coerce_members(args, properties):
        return args_json
    return json.dumps(args, ensure_ascii=False)


def streamable_string_keys(properties: dict[str, Any]) -> set[str] | None:
    """Properties that are strings whatever happens (their unfinished value may stream); None without a
    schema (every string may)."""
    if not properties:
        return None
    return {key for key, schema in properties.items() if set(_types(schema)) == {"string"}}


def safe_arg_prefix(json_str: str, string_keys: set[str] | None) -> str:
    """The part of partial arguments JSON that cannot change any more: up to the last top-level value, plus
    that value's text when it is an unfinished string of a streamable key."""
    last_colon = -1
    last_key: str | None = None
    pending_key: str | None = None
    in_string = escape = False
    string_start = -1
    depth = 0
    for i, ch in enumerate(json_str):
        if escape:
            escape = False
        elif in_string:
            if ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
                if depth == 1 and string_start >= 0:
                    pending_key = json_str[string_start + 1 : i]
        elif ch == '"':
            in_string = True
            string_start = i
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == ":" and depth == 1:
            last_colon = i
            last_key, pending_key = pending_key, None
    if last_colon < 0:
        return ""
    end = last_colon + 1
    while end < len(json_str) and json_str[end] in _JSON_WS:
        end += 1
    if end >= len(json_str) or json_str[end] != '"':
        return json_str[:end]
    if string_keys is not None and last_key not in string_keys:
        return json_str[:end]
    escape = False
    for i in range(end + 1, len(json_str)):
        if escape:
            escape = False
        elif json_str[i] == "\\":
            escape = True
        elif json_str[i] == '"':
            return json_str[:i]
    return json_str
