"""Forced tool choices (`required`, named) read from the JSON the constraint produced: whole and streamed,
as vLLM 0.32's generic handling (`DelegatingParser._extract_tool_calls` and `vllm/tool_parsers/streaming.py`).

With a named choice the whole output is the arguments of that one function. With `required` the output is a
JSON list of calls:

    [{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}]

Whole, the list is read as vLLM validates it (a list of its FunctionDefinition: pydantic over jiter) and each
call's arguments are `json.dumps(parameters, ensure_ascii=False)`; anything that fails validation yields no
calls at all. Streamed, the list is scanned as it grows and each call's `parameters` text is sent verbatim
once its name is complete.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

import msgspec

from vllm_llm.parsers._base import MessageDelta, ParsedCall, ToolCallDelta, random_tool_call_id

__all__ = ["NamedCallStream", "RequiredCallStream", "parse_required"]


# ---- whole ----------------------------------------------------------------------------------------------

_MAX_DEPTH: Final = 200
"""jiter's recursion limit (as pydantic parses): a value may sit inside at most this many arrays/objects."""

_MAX_INT_DIGITS: Final = 4300
"""jiter's bound on the digits of a number's integer part (Python's int-from-text limit, also for floats)."""

_TRUE_STRINGS: Final = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE_STRINGS: Final = frozenset({"0", "off", "f", "false", "n", "no"})


class _Invalid(Exception):
    """The output is not a valid list of function definitions."""


def parse_required(content: str) -> list[ParsedCall]:
    """The calls of a `required` output: a JSON list of {"name", "parameters"}; [] when it is not one.

    Accepts exactly what vLLM's `TypeAdapter(list[FunctionDefinition]).validate_json` accepts: each item an
    object with a string `name`, `parameters` an object or null (or absent: arguments "null"),
    `description` a string or null, `strict`/`defer_loading` null or a lax boolean; other keys ignored.
    """
    try:
        items = _loads(content)
        if not isinstance(items, list):
            raise _Invalid
        calls = [_call(item) for item in items]
    except _Invalid:
        return []
    return calls


def _loads(content: str) -> Any:
    """JSON as jiter reads it: Python's `json` plus jiter's limits (no surrogates, bounded nesting)."""
    if _has_surrogate(content):
        raise _Invalid
    try:
        value = json.loads(content, parse_float=_float, parse_int=_int)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, too deep
        raise _Invalid from exc
    _check_value(value)
    return value


def _check_digits(literal: str) -> None:
    integer_part = literal.lstrip("-").split(".", 1)[0].split("e", 1)[0].split("E", 1)[0]
    if len(integer_part) > _MAX_INT_DIGITS:
        raise _Invalid


def _float(literal: str) -> float:
    _check_digits(literal)
    return float(literal)


def _int(literal: str) -> int:
    _check_digits(literal)
    return int(literal)


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _check_value(root: Any) -> None:
    """Reject what jiter rejects and Python's json accepts: unpaired surrogate escapes and deep nesting."""
    stack: list[tuple[Any, int]] = [(root, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > _MAX_DEPTH:
            raise _Invalid
        if isinstance(value, str):
            if _has_surrogate(value):
                raise _Invalid
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if _has_surrogate(key):
                    raise _Invalid
                stack.append((item, depth + 1))


def _call(item: Any) -> ParsedCall:
    if not isinstance(item, dict):
        raise _Invalid
    name = item.get("name")
    if not isinstance(name, str):
        raise _Invalid
    parameters = item.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise _Invalid
    description = item.get("description")
    if description is not None and not isinstance(description, str):
        raise _Invalid
    for flag in ("strict", "defer_loading"):
        if not _lax_bool_or_none(item.get(flag)):
            raise _Invalid
    return ParsedCall(name=name, arguments=json.dumps(parameters, ensure_ascii=False))


def _lax_bool_or_none(value: Any) -> bool:
    """Whether pydantic's lax `bool | None` accepts this JSON value."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return value in (0, 1)
    if isinstance(value, float):
        return not math.isnan(value) and value in (0.0, 1.0)
    if isinstance(value, str):
        return value.lower() in _TRUE_STRINGS or value.lower() in _FALSE_STRINGS
    return False


# ---- streamed: named ------------------------------------------------------------------------------------


class NamedCallStream:
    """Streams the arguments of the one named call: every delta's text is argument text, the first one
    also carries the call's id and name (sent even when that text is empty)."""

    def __init__(self, name: str, *, index: int) -> None:
        self.name = name
        self.index = index
        self._started = False

    def feed(self, delta_text: str) -> MessageDelta:
        if self._started:
            call = ToolCallDelta(index=self.index, arguments=delta_text)
        else:
            self._started = True
            call = ToolCallDelta(
                index=self.index, id=random_tool_call_id(), name=self.name, arguments=delta_text
            )
        return MessageDelta(tool_calls=[call])


# ---- streamed: required ---------------------------------------------------------------------------------


class _Span(msgspec.Struct):
    """Where one element of the list sits in the text: its name once its string closed (and `name_end`
    just past the quote), and the character span of its `parameters` value (`args_end` None while open)."""

    name: str | None = None
    name_end: int | None = None
    args_start: int | None = None
    args_end: int | None = None

    def ready(self) -> bool:
        return self.name is not None and self.args_start is not None

    def ready_at(self, length: int) -> bool:
        """Whether the first `length` characters had already made this call sendable."""
        return (
            self.name is not None
            and self.name_end is not None
            and self.name_end <= length
            and self.args_start is not None
            and self.args_start < length
        )


# What the scanner expects next inside an element object.
_KEY, _COLON, _VALUE, _STRING_VALUE, _CONTAINER_VALUE, _SCALAR_VALUE, _AFTER_VALUE = range(7)


class _ListScanner:
    """A one-pass reader of a growing `[{"name": ..., "parameters": ...}, ...]` text, as vLLM's
    `_scan_required_tool_calls` reads it: it tracks strings and nesting and interprets only the keys and
    values of the element objects (depth 2). It stops for good at the end of the list, or at anything
    but a list at the top / an object as an element. Keys are compared as raw text (no unescaping).

    Being one left-to-right pass, its spans after n characters are exactly those of scanning the first n
    characters alone, so feeding it piece by piece equals vLLM rescanning the whole text each time.
    """

    def __init__(self) -> None:
        self.text = ""
        self.spans: list[_Span] = []
        self._stopped = False
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._string_start = 0
        self._expect = _KEY
        self._key: str | None = None
        self._value_start = 0

    def feed(self, piece: str) -> None:
        start = len(self.text)
        self.text += piece
        for pos in range(start, len(self.text)):
            if self._stopped:
                return
            self._step(pos, self.text[pos])

    @property
    def _current(self) -> _Span | None:
        return self.spans[-1] if self._depth >= 2 and self.spans else None

    def _step(self, pos: int, ch: str) -> None:
        if self._in_string:
            self._string_char(pos, ch)
        elif ch == '"':
            self._in_string = True
            self._string_start = pos
            if self._depth == 2 and self._expect == _VALUE:
                self._start_value(pos, _STRING_VALUE)
        elif ch in "{[":
            self._open(pos, ch)
        elif ch in "}]":
            self._close(pos)
        elif self._depth == 2:
            self._element_char(pos, ch)

    def _string_char(self, pos: int, ch: str) -> None:
        if self._escaped:
            self._escaped = False
        elif ch == "\\":
            self._escaped = True
        elif ch == '"':
            self._in_string = False
            if self._depth != 2:
                return
            if self._expect == _KEY:
                self._key = self.text[self._string_start + 1 : pos]
                self._expect = _COLON
            elif self._expect == _STRING_VALUE:
                self._end_value(pos + 1)

    def _open(self, pos: int, ch: str) -> None:
        if (self._depth == 0 and ch != "[") or (self._depth == 1 and ch != "{"):
            self._stopped = True
            return
        if self._depth == 1:
            self.spans.append(_Span())
            self._expect = _KEY
            self._key = None
        elif self._depth == 2 and self._expect == _VALUE:
            self._start_value(pos, _CONTAINER_VALUE)
        self._depth += 1

    def _close(self, pos: int) -> None:
        if self._depth == 2 and self._expect == _SCALAR_VALUE:
            self._end_value(pos)
        self._depth -= 1
        if self._depth == 2 and self._expect == _CONTAINER_VALUE:
            self._end_value(pos + 1)
        elif self._depth <= 0:
            self._stopped = True

    def _element_char(self, pos: int, ch: str) -> None:
        if ch == ":":
            if self._expect == _COLON:
                self._expect = _VALUE
        elif ch == ",":
            if self._expect == _SCALAR_VALUE:
                self._end_value(pos)
            self._expect = _KEY
            self._key = None
        elif ch.isspace():
            if self._expect == _SCALAR_VALUE:
                self._end_value(pos)
        elif self._expect == _VALUE:
            self._start_value(pos, _SCALAR_VALUE)

    def _start_value(self, pos: int, kind: int) -> None:
        span = self._current
        assert span is not None
        self._value_start = pos
        if self._key == "parameters":
            span.args_start = pos
        self._expect = kind

    def _end_value(self, end: int) -> None:
        span = self._current
        assert span is not None
        if self._key == "parameters":
            span.args_end = end
        elif self._key == "name" and self._expect == _STRING_VALUE:
            try:
                span.name = json.loads(self.text[self._value_start : end])
                span.name_end = end
            except json.JSONDecodeError:
                span.name = None  # never sendable, as the whole output is no valid list either
        self._expect = _AFTER_VALUE


class RequiredCallStream:
    """Streams the calls of a `required` output as its JSON list grows.

    A call is announced (id, name and its `parameters` text so far) once its name string is complete and
    its `parameters` value has begun; after that each delta carries the new `parameters` text verbatim.
    One delta may carry pieces of several calls. Tool call indexes are `index` plus the position in the
    list.
    """

    def __init__(self, *, index: int) -> None:
        self.index = index
        self._scanner = _ListScanner()

    def feed(self, delta_text: str) -> MessageDelta | None:
        sent = len(self._scanner.text)
        self._scanner.feed(delta_text)
        text = self._scanner.text
        if not text:
            return None
        calls: list[ToolCallDelta] = []
        for position, span in enumerate(self._scanner.spans):
            if not span.ready():
                break  # calls come in order: none after this one can be ready
            assert span.args_start is not None
            end = span.args_end if span.args_end is not None else len(text)
            index = self.index + position
            if span.ready_at(sent):
                new = text[min(end, sent) : end]
                if new:
                    calls.append(ToolCallDelta(index=index, arguments=new))
            else:
                calls.append(
                    ToolCallDelta(
                        index=index,
                        id=random_tool_call_id(),
                        name=span.name,
                        arguments=text[span.args_start : end],
                    )
                )
        return MessageDelta(tool_calls=calls) if calls else None
