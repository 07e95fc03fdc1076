"""Pydantic's lax coercions, for the bodies vLLM's request models (pydantic, lax mode) accept.

vLLM takes `"max_tokens": "5"`, `"temperature": "0.5"` or `"stream": "false"`; our msgspec decoders are
strict, so a body they reject is coerced here and decoded again (`codec.decode_body`). The rules are
pydantic-core's, not msgspec's `strict=False` (which takes `"1e2"` as an int but not `" 5 "`, `"1_0"`,
`"yes"`, `"off"` or `true`):

- int: a bool; a float with no fractional part; a string that, stripped of whitespace, is ASCII digits
  with an optional sign and single underscores between digits, optionally followed by `.` and zeros.
- float: a bool or an int; a string that, stripped, is a Python float literal in ASCII (underscores
  between digits, `nan`, `inf`, `infinity` in any case).
- bool: 0 / 1 (int or float); one of `_TRUE` / `_FALSE` in any case, not stripped.
- str: nothing (pydantic's lax mode does not turn numbers into strings).

Coercion follows the declared type into Structs (a tagged union by its tag), lists and dict values; a
union coerces only when one scalar kind is in it besides null (`int | None`), never `int | str`, as
pydantic's smart union picks the exact `str`. A value no rule takes is left as it is, for the strict
decoder to report.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from msgspec import inspect

__all__ = ["coerce"]

_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_DIGITS = r"[0-9]+(?:_[0-9]+)*"
_INT = re.compile(rf"[+-]?{_DIGITS}(?:\.0+)?")
_FLOAT = re.compile(
    rf"[+-]?(?:(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][+-]?{_DIGITS})?|nan|inf|infinity)",
    re.IGNORECASE,
)


def coerce(value: object, type_: Any) -> object:
    """`value` (decoded JSON) with pydantic's lax coercions applied where `type_` declares scalars."""
    return _coerce(value, _info(type_))


@cache
def _info(type_: Any) -> inspect.Type:
    return inspect.type_info(type_)


def _coerce(value: object, t: inspect.Type) -> object:
    if isinstance(t, inspect.Metadata):
        return _coerce(value, t.type)
    if isinstance(t, inspect.IntType):
        return _as_int(value)
    if isinstance(t, inspect.FloatType):
        return _as_float(value)
    if isinstance(t, inspect.BoolType):
        return _as_bool(value)
    if isinstance(t, inspect.UnionType):
        member = _member(value, t)
        return value if member is None else _coerce(value, member)
    if isinstance(t, inspect.ListType) and isinstance(value, list):
        return [_coerce(item, t.item_type) for item in value]
    if isinstance(t, inspect.DictType) and isinstance(value, dict):
        return {key: _coerce(item, t.value_type) for key, item in value.items()}
    if isinstance(t, inspect.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f.type for f in t.fields}
        return {key: _coerce(item, fields[key]) if key in fields else item for key, item in value.items()}
    return value


def _member(value: object, t: inspect.UnionType) -> inspect.Type | None:
    """The member of a union that `value` is coerced as, if any."""
    if value is None:
        return None
    types = [_unwrapped(m) for m in t.types if not isinstance(m, inspect.NoneType)]
    if isinstance(value, dict):
        structs = [m for m in types if isinstance(m, inspect.StructType)]
        if len(structs) > 1:
            return next((s for s in structs if s.tag_field and value.get(s.tag_field) == s.tag), None)
        mappings: list[inspect.Type] = [*structs] or [m for m in types if isinstance(m, inspect.DictType)]
        return mappings[0] if len(mappings) == 1 else None
    if isinstance(value, list):
        lists = [m for m in types if isinstance(m, inspect.ListType)]
        return lists[0] if len(lists) == 1 else None
    scalars = (inspect.IntType, inspect.FloatType, inspect.BoolType)
    return types[0] if len(types) == 1 and isinstance(types[0], scalars) else None


def _unwrapped(t: inspect.Type) -> inspect.Type:
    return _unwrapped(t.type) if isinstance(t, inspect.Metadata) else t


def _as_int(value: object) -> object:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip()
        if _INT.fullmatch(text):
            return int(text.split(".", 1)[0])
    return value


def _as_float(value: object) -> object:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if _FLOAT.fullmatch(text):
            return float(text)
    return value


def _as_bool(value: object) -> object:
    if isinstance(value, int | float) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        lowered = value.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
    return value
