"""`RawTokenStream`: one engine stream read as `TextDelta`s without detokenizing (tokens in / tokens out).

For a request the text layer would only pass through (one choice, no stop strings, no prompt logprobs),
the route lowers it with `TextLlm.lower` and reads the Llm's raw outputs: token ids and logprob rows,
token strings left empty.
"""

from __future__ import annotations

from vllm_llm import GenerateStream, TextDelta, TextUsage, TokenLogprobs
from vllm_llm.text import FinishReasonName
from vllm_llm.wire import FinishReason, GenerateOutput
from vllm_server.http.openai.logprobs import row_candidates

__all__ = ["RawTokenStream"]

_NAMES: dict[FinishReason, FinishReasonName] = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.ABORT: "abort",
    FinishReason.ERROR: "error",
    FinishReason.REPETITION: "repetition",
}


class RawTokenStream:
    """A single-choice stream of raw outputs as deltas; closing it aborts the request."""

    def __init__(self, stream: GenerateStream, prompt_token_ids: list[int], *, logprobs: bool) -> None:
        self._stream = stream
        self.prompt_token_ids = prompt_token_ids
        self._logprobs = logprobs
        self._first = True
        self._completion_tokens = 0
        self._cached_tokens = 0

    def __aiter__(self) -> RawTokenStream:
        return self

    async def __anext__(self) -> TextDelta:
        return self._delta(await self._stream.__anext__())

    def _delta(self, out: GenerateOutput) -> TextDelta:
        first, self._first = self._first, False
        self._completion_tokens += len(out.token_ids)
        finish = None if out.finish_reason is None else _NAMES[out.finish_reason]
        info = out.prompt_info
        if info is not None:
            self._cached_tokens = info.num_cached_tokens
        delta = TextDelta(
            index=0,
            text="",
            token_ids=list(out.token_ids),
            logprobs=self._positions(out) if self._logprobs else None,
            finish_reason=finish,
            stop_reason=out.stop_reason if finish is not None else None,
            prompt_token_ids=self.prompt_token_ids if first else None,
            num_cached_tokens=info.num_cached_tokens if info is not None else None,
            kv_transfer_params=out.kv_transfer_params if finish is not None else None,
        )
        if finish is not None:
            delta.usage = TextUsage(
                prompt_tokens=len(self.prompt_token_ids),
                completion_tokens=self._completion_tokens,
                cached_tokens=self._cached_tokens,
            )
        return delta

    @staticmethod
    def _positions(out: GenerateOutput) -> list[TokenLogprobs]:
        positions = []
        for row in out.logprobs or ():
            candidates = row_candidates(row)
            chosen = candidates[0]
            positions.append(
                TokenLogprobs(
                    token_id=chosen.token_id,
                    token="",
                    logprob=chosen.logprob,
                    rank=chosen.rank,
                    candidates=candidates,
                )
            )
        return positions

    async def aclose(self) -> None:
        """Close the stream; an unfinished request is aborted."""
        await self._stream.aclose()
