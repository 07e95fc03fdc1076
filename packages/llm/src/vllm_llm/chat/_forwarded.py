"""Prompt token ids forwarded in `kv_transfer_params`: a decode stage reusing its prefill stage's prompt.

In vLLM 0.32's prefill/decode flow the proxy asks the prefill worker for `return_token_ids`, reads the
response's `prompt_token_ids` and sends them to the decode worker as `kv_transfer_params["prompt_token_ids"]`:
the decode worker takes them as the prompt instead of rendering and tokenizing `messages` again (with or
without a KV connector). vLLM takes them out of `kv_transfer_params` either way, so the engine's transfer
parameters never carry them, and ignores them where the messages must be rendered (media, `echo`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from vllm_llm._errors import InvalidParameter, InvalidRequest

__all__ = [
    "FORWARDED_PARAM",
    "Forwarded",
    "check_forwarded_length",
    "check_forwarded_vocab",
    "split_forwarded",
]

_KEY = "prompt_token_ids"
#: The parameter vLLM names in its errors about the forwarded ids.
FORWARDED_PARAM = "kv_transfer_params.prompt_token_ids"


class Forwarded(NamedTuple):
    """A request's `kv_transfer_params` split: the ids to take as the prompt, and what the engine gets."""

    prompt_token_ids: list[int] | None
    """None: render the messages."""
    kv_transfer_params: dict[str, Any] | None


def split_forwarded(kv_transfer_params: dict[str, Any] | None, *, use: bool) -> Forwarded:
    """Take the forwarded ids out of `kv_transfer_params` (the caller's dict is left as it is); `use`
    False drops them unchecked. Raises `InvalidRequest` (vLLM's message) unless they are a non-empty list
    of non-negative ints."""
    if not kv_transfer_params or _KEY not in kv_transfer_params:
        return Forwarded(None, kv_transfer_params)
    # vLLM hands the engine what is left only when something is (an empty dict is no parameters).
    rest = {k: v for k, v in kv_transfer_params.items() if k != _KEY} or None
    ids = kv_transfer_params[_KEY]
    if ids is None or not use:
        return Forwarded(None, rest)
    # bool is an int subclass; JSON's `true` is no token id.
    if not isinstance(ids, list) or not ids or any(type(t) is not int or t < 0 for t in ids):
        raise _invalid(
            "`kv_transfer_params['prompt_token_ids']` must be a non-empty list of non-negative integers."
        )
    return Forwarded(ids, rest)


def check_forwarded_vocab(ids: list[int], max_token_id: int) -> None:
    """Refuse ids past the vocabulary before anything is streamed (the engine would, but only later)."""
    top = max(ids)
    if top > max_token_id:
        raise _invalid(f"Token id {top} is out of vocabulary")


def check_forwarded_length(ids: list[int], keep: int | None, max_model_len: int, *, multimodal: bool) -> None:
    """Refuse ids the context cannot take, as vLLM does (its wording). Nothing renders them, so no
    TokenizeParams check runs: get_max_tokens counts them, shortened by `truncate_prompt_tokens` (`keep`,
    never applied to them), then the engine's input processor counts them all."""
    counted = len(ids) if keep is None else min(len(ids), max_model_len if keep == -1 else keep)
    if counted > max_model_len:
        raise InvalidRequest(
            f"Input length ({counted}) exceeds model's maximum context length ({max_model_len})."
        )
    if counted == max_model_len:  # no room: a max_tokens of 0, which SamplingParams refuses
        raise InvalidParameter("max_tokens must be at least 1, got 0.", param="max_tokens", value=0)
    tokens = "text tokens plus multimodal tokens" if multimodal else "text tokens"
    if len(ids) > max_model_len:
        raise InvalidRequest(
            f"The decoder prompt (length {len(ids)}) is longer than the maximum model length of "
            f"{max_model_len}. Make sure that `max_model_len` is no smaller than the number of {tokens}."
            + (_MM_HINT if multimodal else "")
        )
    if len(ids) == max_model_len:
        raise InvalidRequest(
            f"The decoder prompt (length {len(ids)}) plus the number of requested output tokens (at least 1) "
            f"is longer than the maximum model length of {max_model_len}. Make sure that `max_model_len` is "
            "no smaller than the number of text tokens (prompt + requested output tokens)."
        )


#: What vLLM's input processor adds for a model that takes media.
_MM_HINT = (
    " For image inputs, the number of image tokens depends on the number of images, and possibly their "
    "aspect ratios as well."
)


def _invalid(message: str) -> InvalidRequest:
    # Worded as vLLM's VLLMValidationError prints itself: clients match on the text.
    return InvalidParameter(message, param=FORWARDED_PARAM)
