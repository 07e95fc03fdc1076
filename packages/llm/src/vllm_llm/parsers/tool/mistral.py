"""Mistral tool calls (`--tool-call-parser mistral`, vLLM's MistralToolParser over its MistralParser engine).

Mistral models with `[ARGS]` in the vocabulary (tokenizer v11 and later) write each call as

    [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}

(`[TOOL_CALLS]name{...}` without `[ARGS]` also reads as a call). Text before the first `[TOOL_CALLS]` is
content; after it everything belongs to calls: each call's name runs up to `[ARGS]` or `{`, its arguments up
to the next `[TOOL_CALLS]` or the end. Whole, the arguments are the first JSON value there (text after it is
dropped, values corrected to the tool's schema); streamed, the raw text goes out as it comes. Call ids are
Mistral's: nine random letters and digits. `[THINK]`/`[/THINK]` stay content (reasoning is the reasoning
parser's; see `MarkupToolParser.reasoning_markup_is_text`). Special tokens the format does not use are
dropped.

The parser reads the tokenizer's own format tokens, so it needs `[TOOL_CALLS]` in the vocabulary. Older
Mistral tokenizers (no `[ARGS]`: a JSON array after `[TOOL_CALLS]`) are not supported.
"""

from __future__ import annotations

import functools
import json
import random
import string
from collections.abc import Mapping, Sequence
from typing import Any

from vllm_llm.parsers.tool._mistral_calls import CallAssembler, MarkupToolParser, Slot
from vllm_llm.parsers.tool._mistral_engine import Ev, Grammar, MarkupEngine, Move, State
from vllm_llm.text._tokenizer import TextTokenizer

__all__ = ["ARGS", "END_THINK", "THINK", "TOOL_CALLS", "MistralToolParser", "mistral_grammar"]

TOOL_CALLS = "[TOOL_CALLS]"
ARGS = "[ARGS]"
THINK = "[THINK]"
END_THINK = "[/THINK]"

_ALPHANUMERIC = string.ascii_letters + string.digits
_DECODER = json.JSONDecoder()


@functools.cache
def mistral_grammar(reasoning: bool) -> Grammar:
    """Mistral's format; with `reasoning` (`[THINK]` in the vocabulary) a `[THINK]…[/THINK]` span is
    reasoning, and a call ends it too."""
    ends_reasoning = (Ev.REASONING_END,) if reasoning else ()
    terminals = {"TOOL_CALLS": TOOL_CALLS, "ARGS": ARGS, "OPEN_BRACE": "{"}
    moves: dict[tuple[State, str], Move] = {
        (State.CONTENT, "TOOL_CALLS"): Move(State.TOOL_NAME, (*ends_reasoning, Ev.START)),
        (State.TOOL_NAME, "ARGS"): Move(State.TOOL_ARGS),
        # `name{...}`: the brace both ends the name and opens the arguments.
        (State.TOOL_NAME, "OPEN_BRACE"): Move(State.TOOL_ARGS, (Ev.ARGS,)),
        (State.TOOL_ARGS, "TOOL_CALLS"): Move(State.TOOL_NAME, (Ev.END, Ev.START)),
    }
    if reasoning:
        terminals |= {"THINK_START": THINK, "THINK_END": END_THINK}
        moves |= {
            (State.CONTENT, "THINK_START"): Move(State.REASONING),
            (State.REASONING, "THINK_START"): Move(State.REASONING),
            (State.REASONING, "THINK_END"): Move(State.CONTENT, (Ev.REASONING_END,)),
            (State.CONTENT, "THINK_END"): Move(State.CONTENT),  # a stray end is dropped
            (State.REASONING, "TOOL_CALLS"): Move(State.TOOL_NAME, (Ev.REASONING_END, Ev.START)),
        }
    by_token = frozenset(name for name in terminals if name != "OPEN_BRACE")
    return Grammar(terminals=terminals, moves=moves, by_token=by_token)


def require_tool_calls_token(tokenizer: TextTokenizer) -> int:
    """The id of `[TOOL_CALLS]`; ValueError when the vocabulary lacks it (vLLM refuses such a tokenizer)."""
    token_id = tokenizer.token_to_id(TOOL_CALLS)
    if token_id is None:
        raise ValueError("Mistral parser could not locate the tool call token in the tokenizer!")
    return token_id


class _MistralCalls(CallAssembler):
    """Mistral's call rules: the name is whatever stands before the arguments (even empty), and the
    arguments chunk that ends the name goes out with it."""

    echo_first_args = True

    def new_id(self) -> str:
        return "".join(random.choices(_ALPHANUMERIC, k=9))

    def accept_name(self, name: str) -> bool:
        return True

    def name_from_args(self, slot: Slot) -> str | None:
        return slot.name

    def whole_name_and_args(self, body: str) -> tuple[str, str]:
        return "", self.whole_args(body, "")

    def whole_args(self, body: str, name: str) -> str:
        """The first JSON value of the body (the model may write on after it), else the body stripped."""
        body = body.strip()
        if not body:
            return "{}"
        try:
            _, end = _DECODER.raw_decode(body)
        except ValueError:
            return body
        return body[:end]


class MistralToolParser(MarkupToolParser):
    """`[TOOL_CALLS]name[ARGS]{...}` calls."""

    supports_required_and_named = False  # forced choices are parsed in the native format

    def __init__(self, tokenizer: TextTokenizer, tools: Sequence[Mapping[str, Any]] | None = None) -> None:
        super().__init__(tokenizer, tools)
        require_tool_calls_token(tokenizer)
        if tokenizer.token_to_id(ARGS) is None:
            raise ValueError(
                "Mistral tool parser: the tokenizer has no [ARGS] token (a pre-v11 Mistral tokenizer, whose "
                "JSON-array tool calls are not supported)"
            )
        reasoning = tokenizer.token_to_id(THINK) is not None
        # Reasoning markup is plain content unless the composer says a reasoning parser runs first.
        self._engine = MarkupEngine(mistral_grammar(reasoning), tokenizer, skip_reasoning=True)
        self._calls = _MistralCalls(self.tools, reasoning_open=reasoning)
