"""Which message content a chat template reads: a plain string, or OpenAI-style content parts. vLLM 0.32's
`--chat-template-content-format auto` (`_detect_content_format` in `vllm/renderers/hf.py`).

The template's Jinja AST is searched for a `for` loop over a message's content:

    {% for message in messages %}{% for part in message['content'] %}...{% endfor %}{% endfor %}

Message variables are the targets of loops over `messages` or over variables `set` from it (through
filters, tests and slices: `{% set loop_messages = messages[1:] %}`). A loop over `message.content` /
`message['content']` (through filters, tests, slices), over a macro parameter a call passes such content
to, or over a variable named `content` (outside macros) means "openai"; no such loop means "string". A
template that does not compile, or one the search cannot follow (a `set` or loop over messages that
binds several names), is "string", vLLM's default.

The analysis is scope-blind, as vLLM's is: every `set` anywhere counts. (vLLM never returns on a cycle of
`set`s, `{% set a = messages %}{% set b = a %}{% set a = b %}`; here each variable is followed once.)
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Literal

import jinja2.nodes as nodes

from vllm_llm.chat._template import _compile

__all__ = ["ContentFormat", "detect_content_format"]

ContentFormat = Literal["string", "openai"]


class _Unfollowable(Exception):
    """A binding the search cannot follow (vLLM's analysis fails on it and falls back to "string")."""


@functools.lru_cache(maxsize=32)
def detect_content_format(template: str) -> ContentFormat:
    """The content format the template reads: "openai" when it loops over a message's content parts,
    otherwise "string"."""
    try:
        root = _compile(template).environment.parse(template)
    except Exception:
        return "string"
    try:
        return "openai" if _loops_over_content(root) else "string"
    except _Unfollowable:
        return "string"


def _loops_over_content(root: nodes.Template) -> bool:
    messages = _aliases(root, "messages")
    message_vars = _message_vars(root, messages)
    macro_params, in_macros = _macro_content_params(root, message_vars)
    for loop in root.find_all(nodes.For):
        source = loop.iter
        if any(_reads(source, var, "content") for var in message_vars):
            return _bound_name(loop.target)
        params = macro_params.get(id(loop))
        if isinstance(source, nodes.Name) and params is not None and source.name in params:
            return _bound_name(loop.target)
        if id(loop) not in in_macros and isinstance(source, nodes.Name) and source.name == "content":
            return _bound_name(loop.target)
    return False


def _bound_name(target: nodes.Node) -> bool:
    """A loop found: it counts when it binds one name."""
    if not isinstance(target, nodes.Name):
        raise _Unfollowable
    return True


def _aliases(root: nodes.Template, name: str) -> set[str]:
    """`name` and every variable `set` from it (or from such a variable), transitively."""
    found = {name}
    pending = [name]
    while pending:
        source = pending.pop()
        for assign in root.find_all(nodes.Assign):
            if not _reads(assign.node, source):
                continue
            if not isinstance(assign.target, nodes.Name):
                raise _Unfollowable
            if assign.target.name not in found:
                found.add(assign.target.name)
                pending.append(assign.target.name)
    return found


def _message_vars(root: nodes.Template, messages: set[str]) -> set[str]:
    """The targets of loops over the messages (or their aliases)."""
    names: set[str] = set()
    for loop in root.find_all(nodes.For):
        if any(_reads(loop.iter, var) for var in messages):
            if not isinstance(loop.target, nodes.Name):
                raise _Unfollowable
            names.add(loop.target.name)
    return names


def _macro_content_params(
    root: nodes.Template, message_vars: set[str]
) -> tuple[dict[int, set[str]], set[int]]:
    """For loops inside macros: the macro parameters some call passes a message's content to (by loop id),
    and the ids of all loops inside macros."""
    params_by_loop: dict[int, set[str]] = {}
    in_macros: set[int] = set()

    def is_content(arg: nodes.Node) -> bool:
        return any(_reads(arg, var, "content") for var in message_vars)

    for macro in root.find_all(nodes.Macro):
        arg_names = [arg.name for arg in macro.args]
        params: set[str] = set()
        for call in _calls_of(root, macro.name):
            params.update(
                arg_names[i] for i, arg in enumerate(call.args[: len(arg_names)]) if is_content(arg)
            )
            params.update(
                kw.key
                for kw in call.kwargs
                if isinstance(kw, nodes.Keyword) and kw.key in arg_names and is_content(kw.value)
            )
        for loop in macro.find_all(nodes.For):
            in_macros.add(id(loop))
            if params:
                params_by_loop[id(loop)] = params
    return params_by_loop, in_macros


def _calls_of(root: nodes.Template, name: str) -> Iterator[nodes.Call]:
    for call in root.find_all(nodes.Call):
        if isinstance(call.node, nodes.Name) and call.node.name == name:
            yield call


def _reads(node: nodes.Node, var: str, key: str | None = None) -> bool:
    """Whether `node` is `var` (or `var[key]` / `var.key`), possibly filtered, tested or sliced."""
    while True:
        if isinstance(node, nodes.Filter):
            if node.node is None:
                return False
            node = node.node
        elif isinstance(node, nodes.Test) or (
            isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice)
        ):
            node = node.node
        else:
            break
    if key is None:
        return _is_var(node, var)
    if isinstance(node, nodes.Getitem):
        return _is_var(node.node, var) and isinstance(node.arg, nodes.Const) and node.arg.value == key
    if isinstance(node, nodes.Getattr):
        return _is_var(node.node, var) and node.attr == key
    return False


def _is_var(node: nodes.Node, var: str) -> bool:
    return isinstance(node, nodes.Name) and node.ctx == "load" and node.name == var
