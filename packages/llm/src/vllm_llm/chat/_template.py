"""Chat-template rendering with the sandboxed Jinja environment transformers uses for `apply_chat_template`.

Same environment (`ImmutableSandboxedEnvironment`, trim_blocks, lstrip_blocks, loop controls, a
`{% generation %}` block), same globals and filters (`raise_exception`, `strftime_now`, `tojson` as
`json.dumps(ensure_ascii=False)`), same variables (the named special tokens, overridden by the template
kwargs), and the same `continue_final_message` handling. Template errors become `InvalidRequest`.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

from vllm_llm._errors import InvalidRequest

__all__ = ["render_chat_template"]

_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` (transformers' assistant-mask marker): renders its body."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_render")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render(self, caller: Any) -> str:
        return str(caller())


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


@functools.lru_cache(maxsize=32)
def _compile(template: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env.from_string(template)


def render_chat_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    continue_final_message: bool = False,
    variables: Mapping[str, Any] | None = None,
) -> str:
    """Render `messages` as transformers' `apply_chat_template(tokenize=False)` does."""
    if not messages:
        raise InvalidRequest("cannot apply a chat template to an empty conversation", param="messages")
    if continue_final_message and add_generation_prompt:
        raise InvalidRequest(
            "continue_final_message and add_generation_prompt are not compatible",
            param="continue_final_message",
        )
    chat = [dict(m) for m in messages]
    final_text: str | None = None
    if continue_final_message:
        chat = copy.deepcopy(chat)
        final_text = _tag_final_message(chat, template)
    try:
        compiled = _compile(template)
        rendered = compiled.render(
            **dict(variables or {}),
            messages=chat,
            tools=None if tools is None else [dict(t) for t in tools],
            documents=None if documents is None else [dict(d) for d in documents],
            add_generation_prompt=add_generation_prompt,
        )
    except jinja2.exceptions.TemplateError as exc:
        raise InvalidRequest(f"chat template error: {exc}", param="messages") from exc
    if final_text is not None:
        rendered = _cut_at_tag(rendered, final_text)
    return rendered


def _tag_final_message(chat: list[dict[str, Any]], template: str) -> str:
    final = chat[-1].get("content")
    if final is None:
        raise InvalidRequest(
            'continue_final_message is set but the final message has no "content"',
            param="continue_final_message",
        )
    if "content" not in template:
        raise InvalidRequest(
            'continue_final_message is set but "content" is not used by the chat template',
            param="continue_final_message",
        )
    if isinstance(final, list | tuple):
        parts = [dict(p) for p in final]
        for part in reversed(parts):
            if "text" in part:
                text = str(part["text"])
                part["text"] = text + _CONTINUE_TAG
                chat[-1]["content"] = parts
                return text
        raise InvalidRequest(
            "continue_final_message is set but the final message has no text", param="continue_final_message"
        )
    chat[-1]["content"] = str(final) + _CONTINUE_TAG
    return str(final)


def _cut_at_tag(rendered: str, final_text: str) -> str:
    if final_text.strip() not in rendered or _CONTINUE_TAG.strip() not in rendered:
        raise InvalidRequest(
            "continue_final_message is set but the chat template dropped part of the final message",
            param="continue_final_message",
        )
    at = rendered.rindex(_CONTINUE_TAG.strip())
    if rendered[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return rendered[:at]
    return rendered[:at].rstrip()
