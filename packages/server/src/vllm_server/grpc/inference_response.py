"""`vllm.GenerateResponse` parts from the text layer's deltas: PromptInfo, SequenceOutput, FinishInfo.

Logprobs are flat per position, as the Rust server sends them: the chosen token's logprob and rank, and
the other candidates (vLLM's per-position dict after its first entry). The first prompt position has no
logprob: it reads 0 with rank 0 and no candidates. A stop on eos (no stop reason from the engine) names
the choice's last token as `eos_token_id`; a repetition stop is reported as ABORTED (the enum has no
better value).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vllm_llm import TokenLogprobs
from vllm_llm.text import FinishReasonName
from vllm_server.grpc.inference_request import OutputOptions
from vllm_server.grpc.proto import inference_pb2 as pb
from vllm_server.grpc.proto_struct import dict_to_struct

__all__ = ["Responses"]

_FINISH: dict[FinishReasonName, pb.FinishInfo.FinishReason] = {
    "stop": pb.FinishInfo.STOP,
    "length": pb.FinishInfo.LENGTH,
    "abort": pb.FinishInfo.ABORTED,
    "repetition": pb.FinishInfo.ABORTED,
}

_Flat = tuple[list[float], list[int], list[pb.CandidateTokenInfo]]


class Responses:
    """Builds the response messages of one request, counting each choice's tokens for its FinishInfo."""

    def __init__(self, options: OutputOptions, prompt_token_ids: Sequence[int]) -> None:
        self.options = options
        self._prompt = prompt_token_ids
        self._produced: dict[int, int] = {}
        self._last_token: dict[int, int] = {}

    def prompt_info(self, prompt_logprobs: Sequence[TokenLogprobs | None] | None) -> pb.PromptInfo:
        """The prompt facts (token ids and logprobs if asked for)."""
        info = pb.PromptInfo(num_prompt_tokens=len(self._prompt))
        if self.options.prompt_token_ids:
            info.token_ids.extend(self._prompt)
        if self.options.prompt_logprobs and prompt_logprobs is not None:
            logprobs, ranks, candidates = _flat(prompt_logprobs)
            info.logprobs.extend(logprobs)
            info.ranks.extend(ranks)
            info.candidate_tokens.extend(candidates)
        return info

    def output(
        self,
        index: int,
        text: str,
        token_ids: Sequence[int],
        logprobs: Sequence[TokenLogprobs] | None,
        *,
        finish_reason: FinishReasonName | None,
        stop_reason: int | str | None,
        kv_transfer_params: dict[str, Any] | None,
    ) -> pb.SequenceOutput:
        """One SequenceOutput of choice `index` (a delta, or a whole choice); the last one finishes it."""
        self._produced[index] = self._produced.get(index, 0) + len(token_ids)
        if token_ids:
            self._last_token[index] = token_ids[-1]
        out = pb.SequenceOutput(index=index, num_tokens=len(token_ids))
        if self.options.text:
            out.text = text
        if self.options.token_ids:
            out.token_ids.extend(token_ids)
        if self.options.logprobs and logprobs is not None:
            values, ranks, candidates = _flat(logprobs)
            out.logprobs.extend(values)
            out.ranks.extend(ranks)
            out.candidate_tokens.extend(candidates)
        if finish_reason is not None:
            out.finish_info.CopyFrom(self._finish_info(index, finish_reason, stop_reason, kv_transfer_params))
        return out

    def _finish_info(
        self,
        index: int,
        reason: FinishReasonName,
        stop_reason: int | str | None,
        kv_transfer_params: dict[str, Any] | None,
    ) -> pb.FinishInfo:
        info = pb.FinishInfo(num_output_tokens=self._produced.get(index, 0), finish_reason=_FINISH[reason])
        if reason == "stop":
            if isinstance(stop_reason, str):
                info.stop_string = stop_reason
            elif stop_reason is not None:
                info.stop_token_id = stop_reason
            elif index in self._last_token:
                info.eos_token_id = self._last_token[index]
        if kv_transfer_params is not None:
            info.kv_transfer_params.CopyFrom(dict_to_struct(kv_transfer_params))
        return info


def _flat(positions: Sequence[TokenLogprobs | None]) -> _Flat:
    logprobs: list[float] = []
    ranks: list[int] = []
    candidates: list[pb.CandidateTokenInfo] = []
    for position in positions:
        if position is None:
            logprobs.append(0.0)
            ranks.append(0)
            candidates.append(pb.CandidateTokenInfo())
            continue
        logprobs.append(position.logprob)
        ranks.append(position.rank)
        candidates.append(
            pb.CandidateTokenInfo(
                tokens=[
                    pb.CandidateTokenInfo.TokenInfo(id=c.token_id, logprob=c.logprob, rank=c.rank)
                    for c in position.candidates[1:]
                ]
            )
        )
    return logprobs, ranks, candidates
