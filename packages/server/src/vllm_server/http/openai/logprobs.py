"""Logprobs in the three response shapes, from `TokenLogprobs` (or raw wire rows), as vLLM formats them.

`TokenLogprobs.candidates` is vLLM's per-position dict in order (the chosen token first, then the top-k):
completions report `candidates[:k + 1]` as a token → logprob map (vLLM's `>= i`), chat `candidates[:k]`
with UTF-8 bytes, tokens in / tokens out `candidates[:max(k, 1)]` with ids and ranks. -inf is -9999.0.
With `as_ids` (vLLM's return_tokens_as_token_ids) every token reads "token_id:N"; chat's `bytes` of the
chosen token stay its decoded text's, as vLLM's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from vllm_llm import LogprobCandidate, TokenLogprobs
from vllm_llm.wire import LogprobRow

__all__ = [
    "chat_logprobs",
    "completion_logprobs",
    "prompt_logprobs_json",
    "row_candidates",
    "token_id_logprobs",
    "token_id_placeholder",
]

_FLOOR = -9999.0


def _clamp(logprob: float) -> float:
    # NaN fails max(); vLLM's generate route floors it too.
    return _FLOOR if logprob != logprob else max(logprob, _FLOOR)


def token_id_placeholder(token_id: int) -> str:
    """vLLM's format_token_id_placeholder."""
    return f"token_id:{token_id}"


def completion_logprobs(
    token_ids: Sequence[int],
    positions: Sequence[TokenLogprobs | None],
    k: int,
    decode: Callable[[int], str],
    offset: int = 0,
    *,
    as_ids: bool = False,
) -> tuple[dict[str, Any], int]:
    """The completions `logprobs` object and the text offset after it (streams continue from there)."""
    if as_ids:
        decode = token_id_placeholder
    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    top: list[dict[str, float] | None] = []
    offsets: list[int] = []
    for token_id, position in zip(token_ids, positions, strict=False):
        if position is None:
            token = decode(token_id)
            token_logprobs.append(None)
            top.append(None)
        else:
            token = token_id_placeholder(position.token_id) if as_ids else position.token
            token_logprobs.append(_clamp(position.logprob))
            shown = position.candidates if k == -1 else position.candidates[: k + 1]
            top.append(
                {(token_id_placeholder(c.token_id) if as_ids else c.token): _clamp(c.logprob) for c in shown}
            )
        tokens.append(token)
        offsets.append(offset)
        offset += len(token)
    body = {"text_offset": offsets, "token_logprobs": token_logprobs, "tokens": tokens, "top_logprobs": top}
    return body, offset


def chat_logprobs(positions: Sequence[TokenLogprobs], k: int, *, as_ids: bool = False) -> dict[str, Any]:
    """The chat `logprobs` object ({"content": [...]}) for `top_logprobs=k`."""
    content = []
    for p in positions:
        shown = p.candidates if k == -1 else p.candidates[:k]
        top = []
        for c in shown:
            token = token_id_placeholder(c.token_id) if as_ids else c.token
            top.append(
                {
                    "token": token,
                    "logprob": _clamp(c.logprob),
                    "bytes": list(token.encode("utf-8", errors="replace")),
                }
            )
        content.append(
            {
                "token": token_id_placeholder(p.token_id) if as_ids else p.token,
                "logprob": _clamp(p.logprob),
                "bytes": list(p.token.encode("utf-8", errors="replace")),
                "top_logprobs": top,
            }
        )
    return {"content": content}


def token_id_logprobs(positions: Sequence[Sequence[LogprobCandidate]], k: int) -> dict[str, Any]:
    """The tokens-in / tokens-out `logprobs` ({"content": [...]}); each position's chosen token first."""
    content = []
    for candidates in positions:
        chosen = candidates[0]
        shown = candidates if k == -1 else candidates[: max(k, 1)]
        content.append(
            {
                "token_id": chosen.token_id,
                "logprob": _clamp(chosen.logprob),
                "rank": chosen.rank or None,
                "top_logprobs": [
                    {"token_id": c.token_id, "logprob": _clamp(c.logprob), "rank": c.rank or None}
                    for c in shown
                ],
            }
        )
    return {"content": content}


def row_candidates(row: LogprobRow) -> list[LogprobCandidate]:
    """A raw wire row as vLLM's per-position dict (no decoded tokens): ranks, first place, last value."""
    ranks = [row.rank, *range(1, len(row.token_ids))]
    by_id: dict[int, LogprobCandidate] = {}
    for token_id, logprob, rank in zip(row.token_ids, row.logprobs, ranks, strict=False):
        by_id[token_id] = LogprobCandidate(token_id=token_id, token="", logprob=logprob, rank=rank)
    return list(by_id.values())


def prompt_logprobs_json(positions: Sequence[TokenLogprobs | None] | None) -> list[Any] | None:
    """vLLM's `prompt_logprobs`: per position None or {token_id: {logprob, rank, decoded_token}}."""
    if positions is None:
        return None
    return [
        None
        if p is None
        else {
            str(c.token_id): {"logprob": _clamp(c.logprob), "rank": c.rank, "decoded_token": c.token}
            for c in p.candidates
        }
        for p in positions
    ]
