"""Shared pieces of the JSON tool-call formats (hermes, llama3_json, internlm, jamba).

The streaming side of these formats in vLLM re-parses the whole output at every step with the
`partial_json_parser` package and diffs the results. How a prefix is completed decides what is streamed,
so `loads_partial` reproduces that package's completion (its `loads` with every kind of partial value
allowed, optionally except strings) rather than being a stricter or nicer partial parser: a prefix that
package cannot complete fails here too (`PartialJsonError`).

Also here: the little text helpers vLLM's JSON parsers share (a partial tag at the end of a text, common
prefix/suffix diffs) and `dumps` (JSON as vLLM writes arguments: `ensure_ascii=False`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from vllm_llm.parsers._base import MessageDelta, ToolCallDelta, random_tool_call_id

__all__ = [
    "NAME_FIELD",
    "PartialJsonError",
    "SkipStep",
    "common_prefix",
    "dumps",
    "field",
    "flush_finished_call",
    "intermediate_diff",
    "is_complete_json",
    "loads_partial",
    "loads_partial_prefix",
    "name_delta",
    "partial_tag_overlap",
    "remaining_arguments",
]


class PartialJsonError(ValueError):
    """A prefix that cannot be completed into JSON (yet, or ever)."""


class SkipStep(Exception):
    """This stream step sends nothing and its parse is not recorded (where vLLM fails or waits)."""


#: A `"name": "..."` (non-empty) spelled in a call's JSON text.
NAME_FIELD = re.compile(r'"name"\s*:\s*"([^"]+)"')


def field(call: Any, key: str) -> Any:
    """`call[key]` of a parsed call object (None when missing); SkipStep when it is not an object."""
    if not isinstance(call, dict):
        raise SkipStep(key)
    return call.get(key)


def flush_finished_call(
    call: Any, index: int, streamed: list[str], *, drop_copies: bool
) -> MessageDelta | None:
    """When a new call began: the arguments of the finished call `index` (its last parse `call`) that were
    not streamed, added to `streamed[index]`; what follows the streamed text, or with `drop_copies` (vLLM's
    Jamba parser) the whole arguments less every copy of the streamed text. None before the first call or
    without arguments."""
    if index < 0:
        return None
    arguments = field(call, "arguments")
    if not arguments:
        return None
    text = dumps(arguments)
    more = text.replace(streamed[index], "") if drop_copies else text[len(streamed[index]) :]
    streamed[index] += more
    return MessageDelta(tool_calls=[ToolCallDelta(index=index, arguments=more)])


def name_delta(call: Any, index: int) -> MessageDelta | None:
    """The delta that opens call `index` once its parsed object has a name (None before); SkipStep when
    the name is not a string."""
    name = field(call, "name")
    if not name:
        return None
    if not isinstance(name, str):
        raise SkipStep("name")
    return MessageDelta(tool_calls=[ToolCallDelta(index=index, id=random_tool_call_id(), name=name)])


def dumps(value: Any) -> str:
    """`value` as JSON text the way vLLM writes tool arguments (non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False)


def is_complete_json(text: str) -> bool:
    """Whether `text` is one whole JSON value."""
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True


def remaining_arguments(calls: Sequence[Any], streamed: Sequence[str]) -> str:
    """At the end of a stream, the last call's arguments parsed but not streamed (vLLM's
    get_remaining_unstreamed_args over its prev_tool_call_arr / streamed_args_for_tool): `calls` are the
    last parsed call objects, their "arguments" a value or its JSON text; missing arguments count as {}."""
    if not calls:
        return ""
    index = len(calls) - 1
    last = calls[index]
    if not isinstance(last, dict):
        return ""
    arguments = last.get("arguments", {})
    expected = arguments if isinstance(arguments, str) else dumps(arguments)
    sent = streamed[index] if index < len(streamed) else ""
    return expected[len(sent) :] if expected.startswith(sent) else ""


def partial_tag_overlap(text: str, tag: str) -> int:
    """Length of the longest proper prefix of `tag` that `text` ends with (a tag possibly still coming)."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


def common_prefix(a: str, b: str) -> str:
    """The longest common prefix of two texts."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return a[:n]


def _common_suffix(a: str, b: str) -> str:
    """The longest common suffix of two texts that contains no letter or digit."""
    n = 0
    for x, y in zip(reversed(a), reversed(b), strict=False):
        if x != y or x.isalnum():
            break
        n += 1
    return a[len(a) - n :]


def _drop_last(text: str, part: str) -> str:
    """`text` without the last occurrence of `part`."""
    at = text.rfind(part)
    return text if at < 0 else text[:at] + text[at + len(part) :]


def intermediate_diff(new: str, old: str) -> str:
    """What `new` adds in the middle of `old`: both are partial JSON serialized with synthetic closers,
    so the closers they share at the end and the text they share at the start are cut off
    (vLLM's extract_intermediate_diff, with its quirks: the cuts are plain first/last replacements)."""
    suffix = _common_suffix(new, old)
    if suffix:
        old = _drop_last(old, suffix)
        new = _drop_last(new, suffix)
    prefix = common_prefix(new, old)
    if prefix:
        new = new.replace(prefix, "", 1)
    return new


# ---- partial JSON ---------------------------------------------------------------------------------------
#
# A completion is (kept, added): the prefix of the input kept and the text appended to close it. Inner
# completions return (end, closer) where closer None means "the value was already whole" and "" means
# "a number that may still grow" (kept, but ends its container there).

_Inner = tuple[int, str | None] | None  # None: a partial value of a kind not allowed here
_WORDS = ("null", "true", "false", "Infinity")
_STRUCTURE = re.compile(r'["\[\]{}]')


class _Malformed(Exception):
    """Not JSON, whatever comes next."""


def _skip_blank(s: str, i: int) -> int:
    while i < len(s) and s[i].isspace():
        i += 1
    return i


def _escaped(s: str, index: int) -> bool:
    """Whether the character at `index` follows an odd run of backslashes."""
    before = s[:index]
    return (len(before) - len(before.rstrip("\\"))) % 2 == 1


def _value(s: str, strings: bool, top: bool = False) -> _Inner:
    """A JSON value at the start of `s` (after blanks); IndexError when `s` holds none."""
    first = s[_skip_blank(s, 0)]
    if first == '"':
        return _string(s, strings)
    if first in "1234567890":
        return _number(s, top)
    if first == "[":
        return _array(s, strings)
    if first == "{":
        return _object(s, strings)
    for word in _WORDS:
        if s.startswith(word):
            return len(word), None
        if word.startswith(s):
            return 0, word
    if first == "-":
        if len(s) == 1:
            return None
        if s[1] != "I":
            return _number(s, top)
    for word in ("-Infinity", "NaN"):
        if s.startswith(word):
            return len(word), None
        if word.startswith(s):
            return 0, word
    raise _Malformed(first)


def _string(s: str, strings: bool) -> _Inner:
    if s[0] != '"':
        raise _Malformed(s[0])
    i = 1
    while i < len(s):
        char = s[i]
        if char == "\\":
            if i + 1 == len(s):
                break
            i += 2
            continue
        if char == '"':
            return i + 1, None
        i += 1
    if not strings:
        return None
    # an escape cut short (\uXXXX, \UXXXXXXXX, \xXX) is dropped whole
    for escape, width in (("\\u", 5), ("\\U", 9), ("\\x", 3)):
        at = s.rfind(escape, max(0, i - width), i)
        if at != -1 and not _escaped(s, at):
            return at, '"'
    return i, '"'


def _number(s: str, top: bool) -> _Inner:
    i = 1
    while i < len(s) and s[i] in "1234567890.-+eE":
        i += 1
    cut = False
    while s[i - 1] in ".-+eE":
        cut = True
        i -= 1
    if cut or (i == len(s) and not top):
        return i, ""
    return i, None


def _array(s: str, strings: bool) -> _Inner:
    kept = j = 1
    try:
        while True:
            j = _skip_blank(s, j)
            if s[j] == "]":
                return j + 1, None
            item = _value(s[j:], strings)
            if item is None:
                return kept, "]"
            if item[1] is not None:
                return j + item[0], item[1] + "]"
            kept = j = j + item[0]
            j = _skip_blank(s, j)
            if s[j] == ",":
                j += 1
            elif s[j] == "]":
                return j + 1, None
            else:
                raise _Malformed(s[j])
    except IndexError:
        return kept, "]"


def _object(s: str, strings: bool) -> _Inner:
    kept = j = 1
    try:
        while True:
            j = _skip_blank(s, j)
            if s[j] == "}":
                return j + 1, None
            key = _string(s[j:], strings)
            if key is None or key[1] is not None:
                return kept, "}"
            j = _skip_blank(s, j + key[0])
            if s[j] != ":":
                raise _Malformed(s[j])
            j = _skip_blank(s, j + 1)
            item = _value(s[j:], strings)
            if item is None:
                return kept, "}"
            if item[1] is not None:
                return j + item[0], item[1] + "}"
            kept = j = j + item[0]
            j = _skip_blank(s, j)
            if s[j] == ",":
                j += 1
            elif s[j] == "}":
                return j + 1, None
            else:
                raise _Malformed(s[j])
    except IndexError:
        return kept, "}"


def _fix(s: str, strings: bool, top: bool = False) -> tuple[str, str]:
    """(kept, added) for one value at the start of `s`. The end found in the stripped text cuts the
    unstripped one (as the reference does)."""
    try:
        found = _value(s.strip(), strings, top)
    except IndexError as exc:
        raise _Malformed from exc
    if found is None:
        raise PartialJsonError(s)
    end, closer = found
    return s[:end], closer or ""


def _closers(stack: list[tuple[int, str]]) -> str:
    return "".join("}" if char == "{" else "]" for _, char in reversed(stack))


def _complete(s: str, strings: bool) -> str:
    """`s` completed into JSON text: open containers closed, a partial last value finished or dropped."""
    marks = [(m.start(), m.group()) for m in _STRUCTURE.finditer(s)]
    if not marks or marks[0][1] == '"':
        return "".join(_fix(s, strings, top=True))

    stack: list[tuple[int, str]] = []
    in_string = False
    string_start = string_end = -1
    for at, char in marks:
        if char == '"':
            if not in_string:
                in_string, string_start = True, at
            elif not _escaped(s, at):
                in_string, string_end = False, at
        elif in_string:
            continue
        elif char in "]}":
            if not stack or stack.pop()[1] != ("{" if char == "}" else "["):
                raise _Malformed(char)
        else:
            stack.append((at, char))
    last_at, last_char = marks[-1]
    if not stack:
        return s
    top_at, top_char = stack[-1]

    def before_last_key(container: int) -> str:
        key_start = string_end
        while True:
            key_start = s.rfind('"', container, key_start)
            if key_start == -1:
                return s[: container + 1] + _closers(stack)
            if _escaped(s, key_start):
                key_start -= 1
                continue
            comma = s.rfind(",", container, key_start)
            if comma == -1:
                return s[: container + 1] + _closers(stack)
            return s[:comma] + _closers(stack)

    if in_string and not strings:
        # an unfinished string is not allowed: drop it with its key
        if top_at > string_end and top_char == "{":
            return s[: top_at + 1] + _closers(stack)
        comma = s.rfind(",", max(top_at, string_end) + 1, string_start)
        if comma != -1:
            return s[:comma] + _closers(stack)
        return before_last_key(top_at)

    if in_string:
        if top_char == "[":
            head, tail = _fix(s[string_start:], strings)
            return s[:string_start] + head + tail + _closers(stack)
        start = max(string_end, top_at)
        if "," in s[start + 1 : string_start]:
            comma = s.rindex(",", start, string_start)
            head, tail = _fix("{" + s[comma + 1 :], strings)
            return s[:comma] + head[1:] + tail + _closers(stack[:-1])
        if ":" in s[start + 1 : string_start]:
            head, tail = _fix(s[string_start:], strings)
            return s[:string_start] + head + tail + _closers(stack)
        return s[:string_start] + _closers(stack)

    def reopened(opener: str, rest_from: int, cut: int, outer: list[tuple[int, str]]) -> str:
        head, tail = _fix(opener + s[rest_from:], strings)
        if not head[1:] + tail[:-1].strip():
            return s[:cut] + head[1:] + tail + _closers(stack[:-1])
        return s[: cut + 1] + head[1:] + tail + _closers(outer)

    comma = s.rfind(",", max(string_end, last_at) + 1)
    if comma != -1:
        if not s[comma + 1 :].strip():
            return s[:comma] + _closers(stack)
        if top_char != "[":
            raise _Malformed(s)
        return reopened("[", comma + 1, comma, stack[:-1])

    if last_char in "]}":
        if s[last_at + 1 :].strip():
            raise _Malformed(s)
        return s + _closers(stack)
    if last_char in "[{":
        head, tail = _fix(s[last_at:], strings)
        return s[:last_at] + head + tail + _closers(stack[:-1])

    # the last mark closed a string
    if top_char == "[":
        return s + _closers(stack)
    colon = s.rfind(":", string_end)
    comma = s.rfind(",", top_at + 1, string_start)
    if comma == -1:
        head, tail = _fix(s[top_at:], strings)
        return s[:top_at] + head + tail + _closers(stack[:-1])
    if colon == -1:
        if s.rfind(":", max(top_at, comma) + 1, string_start) != -1:
            return s + _closers(stack)
        # quirk kept: the reference closes the object twice here, so this completion never parses
        return reopened("{", comma + 1, comma, stack)
    if colon <= comma:
        raise _Malformed(s)
    return reopened("{", comma + 1, comma, stack[:-1])


def loads_partial(text: str, *, strings: bool = True) -> Any:
    """The value of a JSON prefix, completed as `partial_json_parser.loads` completes it (every partial
    kind allowed; partial strings only if `strings`). Raises PartialJsonError (or json's error)."""
    try:
        return json.loads(_complete(text, strings))
    except (_Malformed, IndexError, json.JSONDecodeError) as exc:
        raise PartialJsonError(text) from exc


def loads_partial_prefix(text: str, *, strings: bool = True) -> tuple[Any, int]:
    """The first JSON value of `text` (possibly partial) and where it ends: the whole text, or where a
    whole value ends when more follows it (vLLM's partial_json_loads)."""
    try:
        completed = _complete(text, strings)
    except (_Malformed, IndexError) as exc:
        raise PartialJsonError(text) from exc
    try:
        return json.loads(completed), len(text)
    except json.JSONDecodeError as exc:
        if "Extra data" not in exc.msg:
            raise PartialJsonError(text) from exc
    try:
        value, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as exc:
        raise PartialJsonError(text) from exc
    return value, end
