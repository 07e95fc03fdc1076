"""A body that fails validation, told as vLLM tells it: pydantic's error (its `type`, `msg`, `input` and
`ctx`) at the body's location, for FastAPI's validation handler in vLLM to word (`errors.InvalidBody`).

msgspec stops at the first failure; pydantic reports every one, and several for a value that no member of
a union (`str | list[int]`) takes. So the issue is pydantic's where the field has one declared type
(a scalar, a string, a list, a dict, a literal, a required field) and carries msgspec's own text
otherwise, always with pydantic's location.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any, Literal, get_args, get_origin, get_type_hints

import msgspec
from msgspec import inspect

from vllm_server.errors import BodyIssue

__all__ = ["json_issue", "shown_input", "validation_issue"]

_MESSAGE = re.compile(r"(?P<what>.*?)(?: - at `\$(?P<path>[^`]*)`)?", re.DOTALL)
_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[\.\.\.\]")
_MISSING = re.compile(r"Object missing required field `(?P<name>[^`]+)`")
_BOUND = re.compile(r"Expected `(?P<kind>int|float)` (?P<op>>=|<=|>|<) (?P<bound>\S+)")
_MAX_INPUT = 200
_UNKNOWN = object()

#: pydantic's error for a value of the wrong type, by the declared type (and, for some, the value's).
_INT = ("int_type", "Input should be a valid integer")
_INT_STR = ("int_parsing", "Input should be a valid integer, unable to parse string as an integer")
_INT_FLOAT = ("int_from_float", "Input should be a valid integer, got a number with a fractional part")
_FLOAT = ("float_type", "Input should be a valid number")
_FLOAT_STR = ("float_parsing", "Input should be a valid number, unable to parse string as a number")
_BOOL = ("bool_type", "Input should be a valid boolean")
_BOOL_PARSING = ("bool_parsing", "Input should be a valid boolean, unable to interpret input")
_STR = ("string_type", "Input should be a valid string")
_LIST = ("list_type", "Input should be a valid list")
_DICT = ("dict_type", "Input should be a valid dictionary")
_MODEL = ("model_attributes_type", "Input should be a valid dictionary or object to extract fields from")
#: pydantic's error for a number out of a declared range (`Field(ge=...)`), by msgspec's operator: the type,
#: the words and the `ctx` key.
_RANGE = {
    ">=": ("greater_than_equal", "greater than or equal to", "ge"),
    "<=": ("less_than_equal", "less than or equal to", "le"),
    ">": ("greater_than", "greater than", "gt"),
    "<": ("less_than", "less than", "lt"),
}


def json_issue(body: bytes) -> BodyIssue | None:
    """FastAPI's issue for a body that is not JSON (Python's own parser, as FastAPI's), if it is not."""
    try:
        json.loads(body)
    except json.JSONDecodeError as exc:
        return BodyIssue(
            "json_invalid", ("body", exc.pos), "JSON decode error", _shown({}), {"error": exc.msg}
        )
    except (UnicodeDecodeError, RecursionError):
        return None
    return None


def validation_issue(exc: msgspec.ValidationError, raw: object, type_: Any) -> BodyIssue:
    """pydantic's issue for msgspec's `exc`, raised decoding `raw` (the body as plain JSON) as `type_`."""
    match = _MESSAGE.fullmatch(str(exc))
    assert match is not None  # the pattern matches any text
    what, (path, complete) = match["what"], _segments(match["path"] or "")
    loc = ("body", *path)
    if not complete:
        return BodyIssue("value_error", loc, what, _shown(_at(raw, path)))
    declared = _declared(_info(type_), path)
    value = _at(raw, path)
    if (missing := _MISSING.fullmatch(what)) is not None:
        return BodyIssue("missing", (*loc, missing["name"]), "Field required", _shown(value))
    if (bound := _BOUND.fullmatch(what)) is not None and value is not _UNKNOWN:
        return _out_of_range(loc, value, bound)
    if isinstance(declared, inspect.LiteralType) and value is not _UNKNOWN:
        expected = _expected(declared.values)
        return BodyIssue(
            "literal_error", loc, f"Input should be {expected}", _shown(value), {"expected": expected}
        )
    known = _wrong_type(declared, value) if value is not _UNKNOWN else None
    if known is None:
        return BodyIssue("value_error", loc, what, _shown(value))
    return BodyIssue(known[0], loc, known[1], _shown(value))


def _out_of_range(loc: tuple[str | int, ...], value: object, bound: re.Match[str]) -> BodyIssue:
    """pydantic's issue for `value`, out of the range msgspec's `bound` states."""
    kind, words, key = _RANGE[bound["op"]]
    limit: int | float = int(bound["bound"]) if bound["kind"] == "int" else float(bound["bound"])
    return BodyIssue(kind, loc, f"Input should be {words} {limit}", _shown(value), {key: limit})


def _wrong_type(declared: inspect.Type | None, value: object) -> tuple[str, str] | None:
    if isinstance(declared, inspect.IntType):
        if isinstance(value, str):
            return _INT_STR
        return _INT_FLOAT if isinstance(value, float) else _INT
    if isinstance(declared, inspect.FloatType):
        return _FLOAT_STR if isinstance(value, str) else _FLOAT
    if isinstance(declared, inspect.BoolType):
        numeric = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        return _BOOL_PARSING if isinstance(value, str) or numeric else _BOOL
    if isinstance(declared, inspect.StrType):
        return _STR
    if isinstance(declared, inspect.ListType):
        return _LIST
    if isinstance(declared, inspect.DictType):
        return _DICT
    if isinstance(declared, inspect.StructType):
        return _MODEL
    return None


@cache
def _info(type_: Any) -> inspect.Type:
    return inspect.type_info(type_)


def _segments(path: str) -> tuple[tuple[str | int, ...], bool]:
    """`.messages[0].content` as ("messages", 0, "content"), and whether that is all of it: msgspec
    hides a dict's key (`.logit_bias[...]`), so the location stops at the dict."""
    segments: list[str | int] = []
    pos = 0
    for m in _SEGMENT.finditer(path):
        if m.start() != pos or m[0] == "[...]":
            return tuple(segments), False
        segments.append(m[1] if m[1] is not None else int(m[2]))
        pos = m.end()
    return tuple(segments), pos == len(path)


def _declared(t: inspect.Type, path: tuple[str | int, ...]) -> inspect.Type | None:
    """The one type declared at `path` (null aside), None when it is a union or unknown."""
    t = _single(t)
    for segment in path:
        if isinstance(t, inspect.StructType) and isinstance(segment, str):
            field = next((f for f in t.fields if f.encode_name == segment), None)
            if field is None:
                return None
            owner, t = t.cls, _single(field.type)
            if isinstance(t, inspect.LiteralType):  # inspect sorts the values; pydantic lists them as written
                t = inspect.LiteralType(_as_written(owner, field.name))
        elif isinstance(t, inspect.ListType) and isinstance(segment, int):
            t = _single(t.item_type)
        else:
            return None
    return None if isinstance(t, inspect.UnionType) else t


def _as_written(owner: type, name: str) -> tuple[Any, ...]:
    """The values of the literal annotating `owner.name`, in the order they are written."""
    pending: list[Any] = [get_type_hints(owner)[name]]
    values: list[Any] = []
    while pending:
        hint = pending.pop(0)
        if get_origin(hint) is Literal:
            values.extend(get_args(hint))
        else:
            pending[:0] = get_args(hint)
    return tuple(values)


def _single(t: inspect.Type) -> inspect.Type:
    while isinstance(t, inspect.Metadata):
        t = t.type
    if isinstance(t, inspect.UnionType):
        members = [m for m in t.types if not isinstance(m, inspect.NoneType)]
        if len(members) == 1:
            return _single(members[0])
    return t


def _at(raw: object, path: tuple[str | int, ...]) -> object:
    value = raw
    for segment in path:
        found = isinstance(value, dict) and segment in value
        found = found or (isinstance(value, list) and isinstance(segment, int) and segment < len(value))
        if not found:
            return _UNKNOWN
        value = value[segment]  # type: ignore[index]
    return value


def _expected(values: tuple[Any, ...]) -> str:
    """pydantic's list of a literal's values: `'a', 'b' or 'c'`."""
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _shown(value: object) -> str:
    """vLLM's stand-in for a value in an error (_summarize_error_input): short text, containers counted."""
    if value is _UNKNOWN:
        return "..."
    if isinstance(value, str):
        return value if len(value) <= _MAX_INPUT else value[:_MAX_INPUT] + "...[truncated]"
    if isinstance(value, list | dict):
        return f"<{type(value).__name__} of {len(value)} items>"
    text = str(value)
    return text if len(text) <= _MAX_INPUT else text[:_MAX_INPUT] + "...[truncated]"


def shown_input(value: object) -> str:
    """vLLM's stand-in for a value in a validation error (`input`): short text, containers counted."""
    return _shown(value)
