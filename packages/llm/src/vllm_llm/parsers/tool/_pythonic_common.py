"""Python call-list tool calls, shared by `pythonic` and `llama4_pythonic` (vLLM's pythonic helpers in
`vllm/tool_parsers/utils.py`).

The model answers with a Python list of keyword-argument calls and nothing else:

    [get_weather(city='Paris', unit='celsius'), get_time(zone="Europe/Paris")]

Arguments are Python literals (strings, numbers, `True`/`None` and JSON's `true`/`null`, lists, tuples, sets,
dicts, placeholder-free f-strings, signed numbers); they become JSON objects. Whole outputs are read with
`ast` after a cheap shape check; streamed outputs are closed (open strings, brackets and parentheses) at
each step, parsed, and the arguments sent as they grow, holding back the closing characters the step made
up. Any output that does not parse is text (whole), or sends nothing (streamed).
"""

from __future__ import annotations

import ast
import json
import re
import string
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from vllm_llm.parsers._base import (
    ExtractedToolCalls,
    MessageDelta,
    ParsedCall,
    ToolCallDelta,
    ToolParser,
    random_tool_call_id,
)
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = [
    "NotACallList",
    "PythonicCallsParser",
    "close_partial_python",
    "looks_like_call_list",
    "read_call_list",
]


class NotACallList(Exception):
    """The text is not (or not yet) a readable list of keyword-argument calls with literal arguments."""


# ---- the shape check (vLLM's TOOL_CALL_REGEX, decided in one pass) -------------------------------------

# Word characters and whitespace as the `regex` module's Unicode classes (vLLM matches with it): `\w` is
# alphabetic (letters, letter numbers, the circled and squared Latin letters), marks, decimal digits,
# connector punctuation and the joiners; `\s` leaves out the information separators \x1c-\x1f.
_ALPHABETIC_SYMBOLS = ((0x24B6, 0x24E9), (0x1F130, 0x1F149), (0x1F150, 0x1F169), (0x1F170, 0x1F189))
_CALL_LIST_END = re.compile(r"\)(?:(?![\x1c-\x1f])\s)*\]")


def _is_word(char: str) -> bool:
    category = unicodedata.category(char)
    return (
        char == "_"
        or category[0] in "LM"
        or category in ("Nd", "Nl", "Pc")
        or char in "\u200c\u200d"
        or any(low <= ord(char) <= high for low, high in _ALPHABETIC_SYMBOLS)
    )


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace() and not "\x1c" <= text[pos] <= "\x1f":
        pos += 1
    return pos


def _identifier_end(text: str, start: int) -> int:
    """The end of an identifier (an ASCII letter, then word characters) at `start`, or -1."""
    if start >= len(text) or text[start] not in string.ascii_letters:
        return -1
    end = start + 1
    while end < len(text) and _is_word(text[end]):
        end += 1
    return end


def looks_like_call_list(text: str) -> bool:
    """Whether `text` starts like a call list, as vLLM's TOOL_CALL_REGEX matches it.

    `[`, then `name(`: a call with keyword arguments (`name(key=`) runs to any later `)` and `]` with only
    whitespace between; an empty call `name()` is followed by `]`, by another call after whitespace, or
    (while no call has been followed by whitespace alone) by `,` and another call.
    """
    if not text.startswith("["):
        return False
    pos = 1
    commas_allowed = True
    while True:
        end = _identifier_end(text, pos)
        if end < 0 or not text.startswith("(", end):
            return False
        pos = end + 1
        if text.startswith(")", pos):
            pos += 1
            if commas_allowed and text.startswith(",", pos):
                pos = _skip_space(text, pos + 1)
                continue
            pos = _skip_space(text, pos)
            if text.startswith("]", pos):
                return True
            commas_allowed = False
            continue
        end = _identifier_end(text, pos)
        if end < 0 or not text.startswith("=", end):
            return False
        return _CALL_LIST_END.search(text, end + 1) is not None


# ---- reading the calls ----------------------------------------------------------------------------------


_JSON_NAMES: dict[str, Any] = {"null": None, "true": True, "false": False}


def _literal(node: ast.expr) -> Any:
    """The JSON value of one argument expression."""
    if isinstance(node, ast.Constant):
        if node.value is None or isinstance(node.value, str | int | float):
            return node.value
        raise NotACallList("argument is not a JSON value")
    if isinstance(node, ast.Dict):
        keys: list[Any] = []
        for key in node.keys:
            if not isinstance(key, ast.Constant):
                raise NotACallList("dict keys must be literals")
            keys.append(key.value)
        return {key: _literal(value) for key, value in zip(keys, node.values, strict=True)}
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        return [_literal(item) for item in node.elts]
    if isinstance(node, ast.JoinedStr) and all(isinstance(part, ast.Constant) for part in node.values):
        return "".join(str(part.value) for part in node.values if isinstance(part, ast.Constant))
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _literal(node.operand)
        if isinstance(operand, int | float) and not isinstance(operand, bool):
            return -operand if isinstance(node.op, ast.USub) else operand
    raise NotACallList("argument is not a literal")


def _dotted_name(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise NotACallList("call target is not a (dotted) name")
    parts.append(node.id)
    return ".".join(reversed(parts))


def _call(node: ast.Call) -> ParsedCall:
    """One call: its (dotted) name and its keyword arguments as JSON; positional arguments are dropped."""
    arguments: dict[str | None, Any] = {}
    for keyword in node.keywords:
        arguments[keyword.arg] = _literal(keyword.value)
    return ParsedCall(
        name=_dotted_name(node.func),
        arguments=json.dumps(arguments, ensure_ascii=False),
        id=random_tool_call_id(),
    )


def read_call_list(source: str) -> list[ParsedCall]:
    """The calls of Python source whose first statement is a list of calls; raises otherwise (SyntaxError,
    ValueError, NotACallList, or json's TypeError for a key JSON cannot hold)."""
    module = ast.parse(source)
    value = getattr(module.body[0], "value", None) if module.body else None
    if not isinstance(value, ast.List) or not all(isinstance(item, ast.Call) for item in value.elts):
        raise NotACallList("not a list of calls")
    return [_call(item) for item in value.elts if isinstance(item, ast.Call)]


# ---- closing a partial output -------------------------------------------------------------------------

_OPENERS = {"[": "]", "(": ")", "{": "}", "'": "'", '"': '"'}
_CLOSERS = {"]": "[", ")": "(", "}": "{"}


def _escaped(text: str, index: int) -> bool:
    """Whether the character at `index` follows an odd run of backslashes."""
    run = 0
    while index - run - 1 >= 0 and text[index - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def close_partial_python(text: str) -> tuple[str, str] | None:
    """`text` with its open strings, brackets, parentheses and braces closed, and the closing characters
    added (vLLM's make_valid_python); None while the text stops where no value can be closed yet (after
    `=` or `:`, in a keyword or dict key, inside a list item) or the closed text does not parse.
    Raises NotACallList on a mismatched closing bracket."""
    stack: list[str] = []
    for index, char in enumerate(text):
        if stack and stack[-1] in "'\"":
            if char == stack[-1] and not _escaped(text, index):
                stack.pop()
            continue
        if char in "[({'\"":
            stack.append(char)
        elif char in _CLOSERS and (not stack or stack.pop() != _CLOSERS[char]):
            raise NotACallList(f"mismatched {char!r}")
    text = text.rstrip()
    if text.endswith(("=", ":")):
        return None
    top = stack[-1] if stack else ""
    if top == "{":
        before = text[: text.rfind("{")]
        if before.count(":") <= before.count(","):
            return None
    if top == "(":
        before = text[: text.rfind("(")]
        if before.count("=") <= before.count(","):
            return None
    if text.endswith(","):
        text = text[:-1]
    if top == "[" and not text.endswith(("[", ")")):
        return None
    added = "".join(_OPENERS[char] for char in reversed(stack))
    candidate = text + added
    try:
        module = ast.parse(candidate)
    except SyntaxError:
        return None
    if not module.body:
        return None
    # A `{"k"` closed by us reads as a set: a dict key still coming.
    if "}" in added and any(isinstance(node, ast.Set) for node in ast.walk(module)):
        return None
    return candidate, added


# ---- the parser -------------------------------------------------------------------------------------------


class PythonicCallsParser(ToolParser):
    """A whole output that is a call list is calls (and no content); anything else is content.

    Streamed, an output that does not start with the list (after `start_marker`, if the format has one) is
    content; one that does is never content: each step sends what the closed text adds to the calls. As in
    vLLM, whole and streamed can differ: `[f(x=1)]` followed by text streams the call (the text is
    dropped) but is content whole; `[1, 2]` or a cut-off call list streams nothing or a partial call.
    """

    start_marker: ClassVar[str | None] = None
    """A marker the model may put before the list (streamed text starting with it is read as calls)."""

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        self._text = ""
        self._index = -1
        """vLLM's current_tool_id: the call the next step starts at (-1 before any)."""
        self._sent: list[str] = []
        self._called = False

    # ---- whole ----

    def unwrap(self, text: str) -> str:
        """The whole output without the format's markers (the text read, and the content if not calls)."""
        return text

    def extract(self, text: str) -> ExtractedToolCalls:
        text = self.unwrap(text)
        if not looks_like_call_list(text):
            return ExtractedToolCalls(called=False, content=text)
        try:
            calls = read_call_list(text)
        except Exception:  # as vLLM: whatever fails to read is text
            return ExtractedToolCalls(called=False, content=text)
        return ExtractedToolCalls(called=True, calls=calls, content=None)

    # ---- streamed ----

    def unwrap_partial(self, text: str) -> str:
        """The streamed text so far without the format's markers."""
        return text

    def feed(self, delta_text: str, delta_token_ids: Sequence[int]) -> MessageDelta | None:
        self._text += delta_text
        if not self._text.startswith("[") and not (
            self.start_marker is not None and self._text.startswith(self.start_marker)
        ):
            return MessageDelta(content=delta_text)
        try:
            return self._step(self.unwrap_partial(self._text))
        except Exception:  # as vLLM: a step that fails sends nothing (state changed so far stays)
            return None

    def _step(self, text: str) -> MessageDelta | None:
        closed = close_partial_python(text)
        if closed is None:
            return None
        source, added = closed
        calls = read_call_list(source)
        deltas: list[ToolCallDelta] = []
        for index, call in enumerate(calls):
            if index < self._index:
                continue
            self._index = index
            if len(self._sent) == index:
                self._sent.append("")
            complete = index < len(calls) - 1 or ")]" not in added
            if complete:
                self._index += 1
            delta = self._call_delta(index, call, "" if complete else self._withheld(added))
            if delta is not None:
                deltas.append(delta)
                self._sent[index] += delta.arguments or ""
        if deltas:
            self._called = True
            return MessageDelta(tool_calls=deltas)
        if not added and self._index > 0:
            return MessageDelta(content="")  # vLLM's empty delta once the calls are done
        return None

    @staticmethod
    def _withheld(added: str) -> str:
        """The JSON closing characters that the closing `added` (minus its `)]`) put on the arguments."""
        withheld = added[:-2]
        if added[-2] == ")":
            withheld += "}"
        return withheld.replace("'", '"')

    def _call_delta(self, index: int, call: ParsedCall, withheld: str) -> ToolCallDelta | None:
        arguments = call.arguments
        if withheld:
            if not arguments.endswith(withheld):
                raise NotACallList("arguments do not end with the closing characters added")
            arguments = arguments[: -len(withheld)]
        sent = self._sent[index]
        if not sent:
            return ToolCallDelta(index=index, id=call.id, name=call.name, arguments=arguments)
        new = arguments[len(sent) :]
        return ToolCallDelta(index=index, arguments=new) if new else None

    def remaining_arguments(self) -> str:
        # vLLM records a placeholder `{"arguments": {}}` as the calls' state, so what it deems unsent is
        # what "{}" has beyond the first call's streamed arguments.
        if not self._called:
            return ""
        sent = self._sent[0] if self._sent else ""
        return "{}"[len(sent) :] if "{}".startswith(sent) else ""
