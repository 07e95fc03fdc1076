"""`Choice`: the output processing of one engine request (one choice of a text request).

Per wire output, as vLLM's OutputProcessor.process_outputs: detokenize and check stop strings (a stop
string finishes the choice with stop_reason = the string and trims the surplus tokens and logprob rows),
then turn logprob rows into `TokenLogprobs`, then take the new text (held back while a stop string could
still be forming) and, while text is held back, the steps whose text is released whole (for the parsers).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from vllm_llm.text._detokenizer import IncrementalDetokenizer, TokenStep
from vllm_llm.text._logprobs import LogprobsProcessor, TokenLogprobs
from vllm_llm.text._tokenizer import TextTokenizer
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest

__all__ = ["Choice", "ChoiceStep", "FinishReasonName"]

FinishReasonName = Literal["stop", "length", "abort", "error", "repetition"]

_NAMES: dict[FinishReason, FinishReasonName] = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.ABORT: "abort",
    FinishReason.ERROR: "error",
    FinishReason.REPETITION: "repetition",
}


class ChoiceStep(NamedTuple):
    """What one wire output contributes to a choice."""

    text: str
    token_ids: list[int]
    logprobs: list[TokenLogprobs] | None
    finish_reason: FinishReasonName | None
    stop_reason: int | str | None
    stop_string_matched: bool
    prompt_logprobs: list[TokenLogprobs | None] | None
    num_cached_tokens: int | None
    num_cache_creation_tokens: int | None
    first: bool
    token_steps: list[TokenStep] | None


class Choice:
    """Detokenizer, stop strings and logprobs of one engine request."""

    def __init__(
        self,
        tokenizer: TextTokenizer,
        request: GenerateRequest,
        *,
        stop: list[str],
        include_stop_str_in_output: bool,
        skip_special_tokens: bool,
        spaces_between_special_tokens: bool,
    ) -> None:
        sp = request.sampling_params
        self.detokenizer = IncrementalDetokenizer(
            tokenizer,
            request.prompt_token_ids,
            stop=stop,
            min_tokens=sp.min_tokens,
            include_stop_str_in_output=include_stop_str_in_output,
            skip_special_tokens=skip_special_tokens,
            spaces_between_special_tokens=spaces_between_special_tokens,
        )
        # Explicit logprob_token_ids: each position reports the sampled token and those ids (vLLM's
        # num_logprobs).
        num_logprobs = len(sp.logprob_token_ids) if sp.logprob_token_ids else sp.logprobs
        self.logprobs = LogprobsProcessor(tokenizer, num_logprobs)
        self._wants_logprobs = num_logprobs is not None
        self._prompt_logprobs = sp.prompt_logprobs
        self._started = False
        self.finished = False

    def step(self, out: GenerateOutput) -> ChoiceStep:
        """Process one wire output."""
        first = not self._started
        self._started = True
        finish = out.finish_reason
        stop_reason = out.stop_reason
        token_ids = list(out.token_ids)
        rows = out.logprobs
        num_prev = self.detokenizer.num_output_tokens()
        stop_string = self.detokenizer.update(token_ids, finish == FinishReason.STOP)
        if stop_string is not None:
            finish, stop_reason = FinishReason.STOP, stop_string
            kept = self.detokenizer.num_output_tokens() - num_prev
            token_ids = token_ids[:kept]
            rows = rows[:kept] if rows is not None else None
        logprobs: list[TokenLogprobs] | None = None
        if self._wants_logprobs:
            logprobs = self.logprobs.sample(rows or [])
        prompt_logprobs: list[TokenLogprobs | None] | None = None
        info = out.prompt_info
        if info is not None and info.prompt_logprobs is not None:
            prompt_logprobs = self.logprobs.prompt(info.prompt_logprobs, self._prompt_logprobs)
        self.finished = finish is not None
        return ChoiceStep(
            text=self.detokenizer.next_text(self.finished),
            token_ids=token_ids,
            logprobs=logprobs,
            finish_reason=None if finish is None else _NAMES[finish],
            stop_reason=stop_reason if finish is not None else None,
            stop_string_matched=stop_string is not None,
            prompt_logprobs=prompt_logprobs,
            num_cached_tokens=info.num_cached_tokens if info is not None else None,
            num_cache_creation_tokens=info.num_cache_creation_tokens if info is not None else None,
            first=first,
            token_steps=self.detokenizer.next_token_steps(self.finished),
        )
