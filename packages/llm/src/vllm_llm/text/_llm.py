"""`TextLlm`: text in, text out, over any `Llm` — tokenization, lowering, detokenization, stop strings.

The layer does what vLLM's frontend does above its engine core, with vLLM's exact semantics: the prompt is
tokenized with the model's tokenizer (HF `tokenizers`), user sampling parameters are lowered with the
model's generation-config defaults (see `text._lowering`), engine outputs are detokenized incrementally,
stop strings end a choice (and abort its engine request), and logprobs carry decoded tokens. `n > 1`
fans out into n engine requests (`f"{i}_{request_id}"`, seed + i) merged by choice index.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import msgspec
from tokenizers import Tokenizer

from vllm_llm._errors import NoTokenizer
from vllm_llm._interface import Llm
from vllm_llm.text._choice import Choice, ChoiceStep, FinishReasonName
from vllm_llm.text._detokenizer import TokenStep
from vllm_llm.text._fanout import FanOut
from vllm_llm.text._logprobs import LogprobCandidate, TokenLogprobs
from vllm_llm.text._lowering import lower_request, truncate_prompt
from vllm_llm.text._request import TextRequest, TextSamplingParams
from vllm_llm.text._tokenizer import TextTokenizer
from vllm_llm.wire import GenerateRequest, LlmInfo

__all__ = [
    "FinishReasonName",
    "LogprobCandidate",
    "TextChoice",
    "TextDelta",
    "TextLlm",
    "TextRequest",
    "TextResult",
    "TextSamplingParams",
    "TextStream",
    "TextTokenizer",
    "TextUsage",
    "TokenLogprobs",
    "TokenStep",
    "TokenizerSource",
]

TokenizerSource = str | os.PathLike[str] | Tokenizer | TextTokenizer


class TextUsage(msgspec.Struct, kw_only=True, frozen=True):
    """Token counts of a whole request (all choices)."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0
    cache_creation_tokens: int | None = None
    """Prompt tokens the engine computed and wrote to its prefix cache (None: its engine does not say)."""

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


class TextDelta(msgspec.Struct, kw_only=True):
    """New text of one choice; the first delta of a choice carries the prompt facts."""

    index: int
    text: str
    token_ids: list[int]
    logprobs: list[TokenLogprobs] | None = None
    finish_reason: FinishReasonName | None = None
    stop_reason: int | str | None = None
    """The stop token id or stop string that finished the choice (None for eos or other reasons)."""
    cumulative_logprob: float | None = None
    prompt_token_ids: list[int] | None = None
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    num_cached_tokens: int | None = None
    kv_transfer_params: dict[str, Any] | None = None
    usage: TextUsage | None = None
    """Only on the last delta of the stream."""
    token_steps: list[TokenStep] | None = None
    """While stop strings hold text back (`text` may then end inside a token `token_ids` holds): the engine
    outputs whose text this delta releases whole, each as its token ids with exactly their text; what a
    parser keyed on token ids reads, in the steps it reads without a stop string. None: the delta's own
    `text` and `token_ids` are that step."""


class TextChoice(msgspec.Struct, kw_only=True):
    """One whole choice."""

    index: int
    text: str
    token_ids: list[int]
    logprobs: list[TokenLogprobs] | None
    cumulative_logprob: float | None
    finish_reason: FinishReasonName | None
    stop_reason: int | str | None


class TextResult(msgspec.Struct, kw_only=True):
    """A whole request: its prompt, choices (by index) and usage."""

    request_id: str
    prompt_token_ids: list[int]
    prompt_logprobs: list[TokenLogprobs | None] | None
    choices: list[TextChoice]
    usage: TextUsage


class TextStream:
    """The deltas of one text request, choices merged in arrival order; closing it aborts what is left."""

    def __init__(
        self,
        request_id: str,
        prompt_token_ids: list[int],
        fanout: FanOut,
        choices: list[Choice],
        *,
        on_done: Callable[[], None] = lambda: None,
    ) -> None:
        self.request_id = request_id
        self._on_done = on_done
        self.prompt_token_ids = prompt_token_ids
        self._fanout = fanout
        self._choices = choices
        self._open = len(choices)
        self._completion_tokens = 0
        self._cached_tokens: int | None = None
        self._cache_creation_tokens: int | None = None
        self.usage: TextUsage | None = None
        """Set when the last choice finishes."""

    def __aiter__(self) -> TextStream:
        return self

    async def __anext__(self) -> TextDelta:
        if self._open == 0:
            raise StopAsyncIteration
        try:
            index, out = await self._fanout.__anext__()
        except StopAsyncIteration:
            self._open = 0
            self._on_done()
            raise
        choice = self._choices[index]
        step = choice.step(out)
        if step.stop_string_matched:
            await self._fanout.close_one(index)  # aborts the engine request, as vLLM's reqs_to_abort
        return self._delta(index, choice, step, out.kv_transfer_params)

    def _delta(self, index: int, choice: Choice, step: ChoiceStep, kv: dict[str, Any] | None) -> TextDelta:
        self._completion_tokens += len(step.token_ids)
        if step.num_cached_tokens is not None and self._cached_tokens is None:
            self._cached_tokens = step.num_cached_tokens
            self._cache_creation_tokens = step.num_cache_creation_tokens
        delta = TextDelta(
            index=index,
            text=step.text,
            token_ids=step.token_ids,
            logprobs=step.logprobs,
            finish_reason=step.finish_reason,
            stop_reason=step.stop_reason,
            cumulative_logprob=choice.logprobs.cumulative_logprob,
            prompt_token_ids=self.prompt_token_ids if step.first else None,
            prompt_logprobs=step.prompt_logprobs,
            num_cached_tokens=step.num_cached_tokens,
            kv_transfer_params=kv if step.finish_reason is not None else None,
            token_steps=step.token_steps,
        )
        if step.finish_reason is not None:
            self._open -= 1
            if self._open == 0:
                self._on_done()
                self.usage = delta.usage = TextUsage(
                    prompt_tokens=len(self.prompt_token_ids),
                    completion_tokens=self._completion_tokens,
                    cached_tokens=self._cached_tokens or 0,
                    cache_creation_tokens=self._cache_creation_tokens,
                )
        return delta

    async def aclose(self) -> None:
        """Close the stream; unfinished choices are aborted in the engine."""
        self._open = 0
        self._on_done()
        await self._fanout.aclose()

    async def __aenter__(self) -> TextStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def collect(self) -> TextResult:
        """Read the stream to its end and assemble the whole result."""
        n = len(self._choices)
        texts: list[list[str]] = [[] for _ in range(n)]
        tokens: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[TokenLogprobs] | None] = [None] * n
        finals: list[TextDelta | None] = [None] * n
        prompt_logprobs: list[TokenLogprobs | None] | None = None
        async with self:
            async for d in self:
                texts[d.index].append(d.text)
                tokens[d.index].extend(d.token_ids)
                if d.logprobs is not None:
                    logprobs[d.index] = [*(logprobs[d.index] or []), *d.logprobs]
                if d.prompt_logprobs is not None and prompt_logprobs is None:
                    prompt_logprobs = d.prompt_logprobs
                finals[d.index] = d
        choices = [
            TextChoice(
                index=i,
                text="".join(texts[i]),
                token_ids=tokens[i],
                logprobs=logprobs[i],
                cumulative_logprob=None if (f := finals[i]) is None else f.cumulative_logprob,
                finish_reason=None if f is None else f.finish_reason,
                stop_reason=None if f is None else f.stop_reason,
            )
            for i in range(n)
        ]
        usage = self.usage or TextUsage(prompt_tokens=len(self.prompt_token_ids), completion_tokens=0)
        return TextResult(
            request_id=self.request_id,
            prompt_token_ids=self.prompt_token_ids,
            prompt_logprobs=prompt_logprobs,
            choices=choices,
            usage=usage,
        )


class TextLlm:
    """Text generation over any `Llm` (see the module docstring)."""

    def __init__(self, llm: Llm, *, tokenizer: TokenizerSource | None = None) -> None:
        self.llm = llm
        self._tokenizer_source = tokenizer
        self._tokenizer: TextTokenizer | None = None
        self._children: dict[str, list[str]] = {}

    @property
    def tokenizer(self) -> TextTokenizer:
        """The tokenizer: the override, else the `LlmInfo.tokenizer` directory (loaded on first use).

        `NoTokenizer` when neither names one (an Llm that is token-only by design).
        """
        if self._tokenizer is None:
            source = self.tokenizer_source
            if isinstance(source, str) and not source:
                raise NoTokenizer(
                    "this server has no tokenizer: its Llm names none (LlmInfo.tokenizer is empty) and none "
                    "is configured (--tokenizer); it serves token-level requests only"
                )
            self._tokenizer = TextTokenizer.load(source)
        return self._tokenizer

    @property
    def tokenizer_source(self) -> TokenizerSource:
        """Where the tokenizer comes from: the override, else the Llm's `LlmInfo.tokenizer` ("" for none)."""
        source = self._tokenizer_source
        return source if source is not None else self.llm.info().tokenizer

    def info(self) -> LlmInfo:
        """The underlying Llm's info."""
        return self.llm.info()

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Tokenize `text`."""
        return self.tokenizer.encode(text, add_special_tokens=add_special_tokens)

    def decode(self, token_ids: Sequence[int], *, skip_special_tokens: bool = True) -> str:
        """Detokenize `token_ids`."""
        return self.tokenizer.decode(token_ids, skip_special_tokens=skip_special_tokens)

    def prompt_token_ids(self, request: TextRequest) -> list[int]:
        """The prompt as token ids (text prompts tokenized), truncated as `truncate_prompt_tokens` asks."""
        if isinstance(request.prompt, str):
            ids = self.encode(request.prompt, add_special_tokens=request.add_special_tokens)
        else:
            ids = list(request.prompt)
        return truncate_prompt(
            ids,
            request.truncate_prompt_tokens,
            request.truncation_side,
            max_model_len=self.llm.info().max_model_len,
            max_tokens=request.params.max_tokens,
        )

    def lower(self, request: TextRequest) -> list[GenerateRequest]:
        """The engine requests (one per choice) that `request` becomes; raises `InvalidRequest`."""
        prompt = self.prompt_token_ids(request)
        return lower_request(request, prompt, self.llm.info(), self.tokenizer).requests

    async def generate(self, request: TextRequest) -> TextStream:
        """Validate, lower and submit `request`; return the stream of its deltas."""
        prompt = self.prompt_token_ids(request)
        lowered = lower_request(request, prompt, self.llm.info(), self.tokenizer)
        p = request.params
        choices = [
            Choice(
                self.tokenizer,
                child,
                stop=lowered.stop,
                include_stop_str_in_output=p.include_stop_str_in_output,
                skip_special_tokens=p.skip_special_tokens,
                spaces_between_special_tokens=p.spaces_between_special_tokens,
            )
            for child in lowered.requests
        ]
        streams = []
        try:
            for child in lowered.requests:
                streams.append(await self.llm.generate(child))
        except BaseException:
            for stream in streams:
                await stream.aclose()
            raise
        self._children[request.request_id] = [child.request_id for child in lowered.requests]

        def forget() -> None:
            self._children.pop(request.request_id, None)

        return TextStream(request.request_id, prompt, FanOut(streams), choices, on_done=forget)

    async def complete(self, request: TextRequest) -> TextResult:
        """Generate and collect the whole result."""
        return await (await self.generate(request)).collect()

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort text requests by id (every choice); each aborted choice ends with finish_reason abort."""
        engine_ids = [cid for rid in request_ids for cid in self._children.get(rid, [rid])]
        if engine_ids:
            await self.llm.abort(engine_ids)
