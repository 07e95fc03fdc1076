"""Parity of our parsers with vLLM's on one corpus: the same output text parsed whole and streamed token by
token (at every token boundary of its tokenization) by `vllm_llm.parsers.ChatParser` and by vLLM's own
`Parser` (ParserManager, as its chat serving composes it), compared as messages.

A corpus is a JSON file in `corpus/`:
    {"tool_parser": "hermes" | null, "reasoning_parser": "qwen3" | null,
     "tools": [...OpenAI tools...], "tool_choice": "auto" (default) | "none" | "required" | {named},
     "chat_template_kwargs": {...} (optional), "prompt": "text ending the prompt" (optional),
     "cases": [{"name": "...", "text": "model output"}, ...]}
Streamed results are compared as what a client assembles: content and reasoning concatenated, tool calls by
index with name and arguments concatenated. Random tool call ids compare as their format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_llm.parsers import (
    ChatParser,
    MessageDelta,
    NamedToolChoice,
    ToolChoice,
    reasoning_parser_class,
    tool_parser_class,
)
from vllm_llm.text._tokenizer import TextTokenizer

CORPUS_DIR = Path(__file__).parent / "corpus"
_RANDOM_ID = re.compile(r"^(chatcmpl-tool-[0-9a-f]{16}|[A-Za-z0-9]{9})$")  # vLLM's, Mistral's
_INDEXED_RANDOM_ID = re.compile(r"^(call_\d+_)[0-9a-f]{16}$")  # xLAM's call_{index}_{random}


@dataclass(frozen=True)
class Corpus:
    path: Path
    tool_parser: str | None
    reasoning_parser: str | None
    tools: list[dict[str, Any]] | None
    tool_choice: str | dict[str, Any]
    chat_template_kwargs: dict[str, Any] | None
    prompt: str
    cases: list[dict[str, str]]

    @classmethod
    def load(cls, path: Path) -> Corpus:
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            path=path,
            tool_parser=data.get("tool_parser"),
            reasoning_parser=data.get("reasoning_parser"),
            tools=data.get("tools"),
            tool_choice=data.get("tool_choice", "auto"),
            chat_template_kwargs=data.get("chat_template_kwargs"),
            prompt=data.get("prompt", ""),
            cases=data["cases"],
        )


def corpora() -> list[Corpus]:
    return [Corpus.load(p) for p in sorted(CORPUS_DIR.glob("*.json"))]


@dataclass
class Message:
    """A parsed message as a client sees it."""

    reasoning: str | None = None
    content: str | None = None
    calls: list[dict[str, Any]] = field(default_factory=list)


def _id(value: str | None) -> str | None:
    """A random id as its format; a format's own id as it is."""
    if value is None:
        return None
    if _RANDOM_ID.match(value):
        return "<random>"
    return _INDEXED_RANDOM_ID.sub(r"\1<random>", value)


def token_steps(tokenizer: TextTokenizer, text: str, every: int = 1) -> list[tuple[str, list[int]]]:
    """`text` as engine deltas of `every` tokens (1: split at every token boundary; more: deltas as a
    stream interval or a slow reader coalesces them), text decoded incrementally (an incomplete character
    is held back until the token that completes it, as a detokenizer does)."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    steps: list[tuple[str, list[int]]] = []
    sent = ""
    for start in range(0, len(ids), every):
        end = min(start + every, len(ids))
        decoded = tokenizer.decode(ids[:end])
        if decoded.endswith("\ufffd") and end < len(ids):
            steps.append(("", ids[start:end]))
            continue
        steps.append((decoded[len(sent) :], ids[start:end]))
        sent = decoded
    return steps


class Assembled:
    """Stream deltas assembled as a client does."""

    def __init__(self) -> None:
        self.reasoning = ""
        self.content = ""
        self.calls: dict[int, dict[str, Any]] = {}

    def add(
        self, content: str | None, reasoning: str | None, calls: Sequence[tuple[int, Any, Any, Any]]
    ) -> None:
        self.content += content or ""
        self.reasoning += reasoning or ""
        for index, call_id, name, arguments in calls:
            call = self.calls.setdefault(index, {"id": None, "name": "", "arguments": ""})
            if call_id is not None and call["id"] is None:
                call["id"] = _id(call_id)
            call["name"] += name or ""
            call["arguments"] += arguments or ""

    def message(self) -> Message:
        return Message(
            reasoning=self.reasoning or None,
            content=self.content or None,
            calls=[self.calls[i] for i in sorted(self.calls)],
        )


# ---- ours ------------------------------------------------------------------------------------------


def our_tool_choice(choice: str | Mapping[str, Any]) -> ToolChoice:
    if isinstance(choice, Mapping):
        return NamedToolChoice(name=choice["function"]["name"])
    assert choice in ("none", "auto", "required")
    return choice  # type: ignore[return-value]


def our_parser(tokenizer: TextTokenizer, corpus: Corpus) -> ChatParser:
    return ChatParser(
        tokenizer=tokenizer,
        tool_parser=tool_parser_class(corpus.tool_parser) if corpus.tool_parser else None,
        reasoning_parser=reasoning_parser_class(corpus.reasoning_parser) if corpus.reasoning_parser else None,
        tools=corpus.tools,
        tool_choice=our_tool_choice(corpus.tool_choice),
        chat_template_kwargs=corpus.chat_template_kwargs,
    )


def ours_whole(tokenizer: TextTokenizer, corpus: Corpus, text: str) -> Message:
    parsed = our_parser(tokenizer, corpus).parse(text)
    return Message(
        reasoning=parsed.reasoning,
        content=parsed.content,
        calls=[{"id": _id(c.id), "name": c.name, "arguments": c.arguments} for c in parsed.tool_calls or []],
    )


def ours_streamed(tokenizer: TextTokenizer, corpus: Corpus, text: str, every: int = 1) -> Message:
    parser = our_parser(tokenizer, corpus)
    parser.start(tokenizer.encode(corpus.prompt, add_special_tokens=False))
    out = Assembled()
    steps = token_steps(tokenizer, text, every)
    for n, (delta_text, ids) in enumerate(steps):
        delta: MessageDelta | None = parser.feed(delta_text, ids, finished=n == len(steps) - 1)
        if delta is not None:
            out.add(
                delta.content,
                delta.reasoning,
                [(c.index, c.id, c.name, c.arguments) for c in delta.tool_calls],
            )
    return out.message()


# ---- vLLM's ----------------------------------------------------------------------------------------


class Vllm:
    """vLLM's parsers over the same tokenizer (imports vLLM: build once per session)."""

    def __init__(self, model_dir: Path) -> None:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        from vllm.parser.parser_manager import ParserManager
        from vllm.tokenizers import get_tokenizer

        self._request_cls = ChatCompletionRequest
        self._manager = ParserManager
        self.tokenizer = get_tokenizer(str(model_dir))

    def request(self, corpus: Corpus) -> Any:
        body: dict[str, Any] = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hi"}],
            "tool_choice": corpus.tool_choice,
        }
        if corpus.tools is not None:
            body["tools"] = corpus.tools
        if corpus.chat_template_kwargs is not None:
            body["chat_template_kwargs"] = corpus.chat_template_kwargs
        return self._request_cls.model_validate(body)

    def parser(self, corpus: Corpus) -> tuple[Any, Any]:
        cls: Any = self._manager.get_parser(
            tool_parser_name=corpus.tool_parser,
            reasoning_parser_name=corpus.reasoning_parser,
            enable_auto_tools=True,
            tokenizer=self.tokenizer,
        )
        request: Any = self.request(corpus)
        parser = cls(self.tokenizer, request.tools, chat_template_kwargs=corpus.chat_template_kwargs or {})
        request = parser.adjust_request(request)
        return cls(
            self.tokenizer, request.tools, chat_template_kwargs=corpus.chat_template_kwargs or {}
        ), request

    def whole(self, corpus: Corpus, text: str) -> Message:
        parser, request = self.parser(corpus)
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        reasoning, content, calls = parser.parse(
            text, request, enable_auto_tools=True, model_output_token_ids=ids
        )
        return Message(
            reasoning=reasoning,
            content=content,
            calls=[{"id": _id(c.id), "name": c.name, "arguments": c.arguments} for c in calls or []],
        )

    def streamed(self, tokenizer: TextTokenizer, corpus: Corpus, text: str, every: int = 1) -> Message:
        parser, request = self.parser(corpus)
        prompt = tokenizer.encode(corpus.prompt, add_special_tokens=False)
        out = Assembled()
        steps = token_steps(tokenizer, text, every)
        for n, (delta_text, ids) in enumerate(steps):
            delta = parser.parse_delta(
                delta_text, ids, request, prompt_token_ids=prompt, finished=n == len(steps) - 1
            )
            if delta is not None:
                out.add(
                    delta.content,
                    delta.reasoning,
                    [
                        (
                            c.index,
                            c.id,
                            c.function.name if c.function else None,
                            c.function.arguments if c.function else None,
                        )
                        for c in delta.tool_calls
                    ],
                )
        return out.message()

    def skips_special_tokens(self, corpus: Corpus) -> bool:
        """vLLM's skip_special_tokens after the parser adjusted the request."""
        return bool(self.parser(corpus)[1].skip_special_tokens)
