"""Lowering: user-facing `TextSamplingParams` to the wire `SamplingParams`, exactly as vLLM 0.32 does.

The order of vLLM's own steps is kept: generation-config defaults for unset parameters (the OpenAI
serving layer's rule), max_tokens from max_model_len and the prompt length (`get_max_tokens`),
`SamplingParams.__post_init__` (normalisation, `_verify_args`), `SamplingParams.verify` (vocabulary and
logprob limits), then `update_from_generation_config` (eos and stop ids) and `update_from_tokenizer`
(bad words), and for n > 1 the `ParentRequest` children (id `f"{i}_{request_id}"`, seed + i).
Every violation raises `InvalidRequest` naming the parameter, before anything reaches the Llm.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

from vllm_llm._errors import InvalidParameter, InvalidRequest, PromptTooLong
from vllm_llm.text._request import TextRequest, TextSamplingParams
from vllm_llm.text._tokenizer import TextTokenizer
from vllm_llm.wire import GenerateRequest, GenerationDefaults, LlmInfo, SamplingParams

__all__ = [
    "MAX_LOGPROBS",
    "Lowered",
    "check_truncation",
    "child_request_id",
    "lower_request",
    "truncate_prompt",
]

#: vLLM's default `--max-logprobs`.
MAX_LOGPROBS = 20
#: vLLM's MAX_LOGPROB_TOKEN_IDS.
MAX_LOGPROB_TOKEN_IDS = 128
#: vLLM's VLLM_MAX_N_SEQUENCES and VLLM_MAX_NUM_BAD_WORDS defaults.
MAX_N = 16384
MAX_NUM_BAD_WORDS = 128
_SAMPLING_EPS = 1e-5
_MAX_TEMP = 1e-2
#: vLLM's neutral defaults for parameters a generation config may override.
_NEUTRAL: dict[str, float] = {
    "repetition_penalty": 1.0,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "min_p": 0.0,
}


class Lowered(NamedTuple):
    """The engine requests of one text request (one per choice) and the stop strings kept above them."""

    requests: list[GenerateRequest]
    stop: list[str]


def child_request_id(request_id: str, index: int, n: int) -> str:
    """The engine request id of choice `index`: the request id itself when n == 1 (as vLLM)."""
    return request_id if n == 1 else f"{index}_{request_id}"


def check_truncation(keep: int | None, side: str | None, *, max_model_len: int) -> None:
    """vLLM's TokenizeParams checks of `truncate_prompt_tokens` (`keep`) and `truncation_side`."""
    if keep is None:
        return
    if keep < -1:
        raise InvalidRequest(
            f"truncate_prompt_tokens must be at least -1, got {keep}", param="truncate_prompt_tokens"
        )
    if keep > max_model_len:
        raise InvalidParameter(
            f"truncate_prompt_tokens={keep} cannot be greater than max_model_len = {max_model_len}. "
            "Please request a smaller truncation size.",
            param="truncate_prompt_tokens",
            value=keep,
        )
    if side not in (None, "left", "right"):
        raise InvalidRequest("`truncation_side` must be either 'left' or 'right'.", param="truncation_side")


def truncate_prompt(
    prompt_token_ids: list[int],
    keep: int | None,
    side: str | None,
    *,
    max_model_len: int,
    max_tokens: int | None,
) -> list[int]:
    """vLLM's TokenizeParams truncation: keep `keep` tokens (-1: the context less one token for output
    when output is asked for, else the whole context), cutting the left end unless `side` is "right"."""
    if keep is None:
        return prompt_token_ids
    check_truncation(keep, side, max_model_len=max_model_len)
    if keep == -1:
        keep = max(0, max_model_len - 1) if max_tokens else max_model_len
    if keep >= len(prompt_token_ids):
        return prompt_token_ids
    if keep == 0:
        return []
    return prompt_token_ids[:keep] if side == "right" else prompt_token_ids[-keep:]


def lower_request(
    request: TextRequest, prompt_token_ids: list[int], info: LlmInfo, tokenizer: TextTokenizer
) -> Lowered:
    """Validate and lower `request`; raises `InvalidRequest` (or `PromptTooLong`)."""
    _check_prompt(prompt_token_ids, info)
    p = request.params
    defaults = info.generation_defaults or GenerationDefaults()
    value = _resolver(p, defaults)
    temperature = float(value("temperature"))
    sp = SamplingParams(
        temperature=temperature,
        top_p=float(value("top_p")),
        top_k=int(value("top_k")),
        min_p=float(value("min_p")),
        seed=None if p.seed == -1 else p.seed,
        presence_penalty=float(value("presence_penalty")),
        frequency_penalty=float(value("frequency_penalty")),
        repetition_penalty=float(value("repetition_penalty")),
        max_tokens=_max_tokens(p.max_tokens, len(prompt_token_ids), info, defaults),
        min_tokens=p.min_tokens,
        ignore_eos=p.ignore_eos,
        # vLLM's OpenAI server: explicit logprob_token_ids take the place of the top-k.
        logprobs=None if p.logprob_token_ids else _true_is_one(p.logprobs),
        logprob_token_ids=p.logprob_token_ids or None,
        prompt_logprobs=_true_is_one(p.prompt_logprobs),
        logit_bias=_logit_bias(p.logit_bias),
        allowed_token_ids=p.allowed_token_ids,
        structured_outputs=p.structured_outputs,
        repetition_detection=p.repetition_detection,
        extra_args=p.extra_args,
        stream_interval=p.stream_interval,
    )
    stop = list(dict.fromkeys(p.stop))
    stop_token_ids = list(dict.fromkeys(p.stop_token_ids))
    _verify_args(p, sp, stop)
    if 0 < sp.temperature < _MAX_TEMP:
        sp.temperature = _MAX_TEMP
    if sp.temperature < _SAMPLING_EPS:
        sp.top_p, sp.top_k, sp.min_p = 1.0, 0, 0.0
        if p.n > 1:
            raise InvalidRequest(f"n must be 1 when using greedy sampling, got {p.n}.")
    _verify_against_model(sp, stop_token_ids, info)
    budget = p.thinking_token_budget
    if budget is not None and budget != -1:  # -1: unlimited, vLLM's None
        if info.reasoning_parser is None:
            raise InvalidRequest(
                "thinking_token_budget is set but reasoning_config is not configured. Please set "
                "--reasoning-parser and/or --reasoning-config to use thinking_token_budget."
            )
        sp.thinking_token_budget = budget
    sp.skip_reading_prefix_cache = sp.prompt_logprobs is not None
    eos = info.eos_token_id if info.eos_token_id is not None else tokenizer.eos_token_id
    _apply_generation_config(sp, stop_token_ids, eos, info.eos_token_ids or ())
    sp.bad_words_token_ids = _bad_words_token_ids(list(dict.fromkeys(p.bad_words)), tokenizer)
    return Lowered([_child(request, prompt_token_ids, sp, i) for i in range(p.n)], stop)


def _check_prompt(prompt: Sequence[int], info: LlmInfo) -> None:
    if not prompt:
        raise InvalidRequest("the prompt cannot be empty", param="prompt")
    if len(prompt) >= info.max_model_len:
        raise PromptTooLong(max_model_len=info.max_model_len, prompt_len=len(prompt))
    bad = [t for t in prompt if not 0 <= t < info.vocab_size]
    if bad:
        raise InvalidRequest(
            f"prompt token ids {bad[:8]} are out of vocabulary ({info.vocab_size})", param="prompt"
        )


def _resolver(p: TextSamplingParams, defaults: GenerationDefaults) -> Any:
    def value(name: str) -> Any:
        given = getattr(p, name)
        if given is not None:
            return given
        default = getattr(defaults, name)
        return _NEUTRAL[name] if default is None else default

    return value


def _max_tokens(given: int | None, prompt_len: int, info: LlmInfo, defaults: GenerationDefaults) -> int:
    # vLLM's get_max_tokens: the least of the room left, the request's (or the default) value.
    room = info.max_model_len - prompt_len
    fallback = given if given is not None else defaults.max_tokens
    if given is not None and given < 1:
        message = f"max_tokens must be at least 1, got {given}."
        raise InvalidParameter(message, param="max_tokens", value=given)
    return room if fallback is None else min(room, fallback)


def _true_is_one(k: int | None) -> int | None:
    return 1 if k is True else k


def _logit_bias(bias: dict[int, float] | None) -> dict[int, float] | None:
    if bias is None:
        return None
    return {int(t): min(100.0, max(-100.0, float(b))) for t, b in bias.items()}


def _range_error(param: str, message: str) -> InvalidRequest:
    return InvalidRequest(f"{param} {message}", param=param)


def _check_int64(param: str, value: int | None) -> None:
    """The wire carries 64-bit integers: a larger value is the caller's error, not a mangled message."""
    if value is not None and not _INT64_MIN <= value <= _INT64_MAX:
        raise _range_error(param, f"must fit in a signed 64-bit integer, got {value}")


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _verify_args(p: TextSamplingParams, sp: SamplingParams, stop: list[str]) -> None:
    """vLLM's SamplingParams._verify_args."""
    for name in ("seed", "top_k", "max_tokens", "min_tokens", "stream_interval"):
        _check_int64(name, getattr(sp, name))
    if sp.stream_interval is not None and sp.stream_interval < 1:
        raise _range_error("stream_interval", f"must be at least 1, got {sp.stream_interval}")
    _verify_n(p.n)
    for name in ("presence_penalty", "frequency_penalty"):
        v = getattr(sp, name)
        if not -2.0 <= v <= 2.0:
            raise _range_error(name, f"must be in [-2, 2], got {v}")
    if not math.isfinite(sp.repetition_penalty) or sp.repetition_penalty <= 0.0:
        raise _range_error("repetition_penalty", f"must be a finite number > 0, got {sp.repetition_penalty}")
    _verify_temperature(sp.temperature)
    if not 0.0 < sp.top_p <= 1.0:
        raise InvalidParameter(f"top_p must be in (0, 1], got {sp.top_p}.", param="top_p", value=sp.top_p)
    if sp.top_k < -1:
        raise _range_error("top_k", f"must be 0 (disable), or at least 1, got {sp.top_k}")
    if not 0.0 <= sp.min_p <= 1.0:
        raise _range_error("min_p", f"must be in [0, 1], got {sp.min_p}")
    if sp.min_tokens < 0:
        raise _range_error("min_tokens", f"must be greater than or equal to 0, got {sp.min_tokens}")
    if sp.max_tokens is not None and sp.min_tokens > sp.max_tokens:
        raise _range_error("min_tokens", f"must be less than or equal to max_tokens={sp.max_tokens}")
    for name in ("logprobs", "prompt_logprobs"):
        k = getattr(sp, name)
        if k is not None and k != -1 and k < 0:
            raise _range_error(name, f"must be non-negative or -1, got {k}")
    if any(not s for s in stop):
        raise _range_error("stop", "cannot contain an empty string")
    if any(not w for w in p.bad_words):
        raise _range_error("bad_words", "cannot contain an empty string")
    so = sp.structured_outputs
    if so is not None:
        kinds = (so.json, so.regex, so.choice, so.grammar, so.json_object, so.structural_tag)
        if sum(k is not None for k in kinds) != 1:
            raise _range_error("structured_outputs", "must set exactly one kind of constraint")


def _verify_n(n: int) -> None:
    """vLLM's _verify_num_sequences (no parameter named)."""
    if n < 1:
        raise InvalidRequest(f"n must be at least 1, got {n}.")
    if n > MAX_N:
        raise InvalidRequest(
            f"n must be at most {MAX_N}, got {n}. To increase this limit, set the VLLM_MAX_N_SEQUENCES "
            "environment variable."
        )


def _verify_temperature(t: float) -> None:
    if not math.isfinite(t):
        raise InvalidParameter(f"temperature must be a finite number, got {t}.", param="temperature", value=t)
    if t < 0.0:
        raise InvalidParameter(f"temperature must be non-negative, got {t}.", param="temperature", value=t)
    if t > 2.0:
        raise InvalidParameter(f"temperature must be in [0, 2], got {t}.", param="temperature", value=t)


def _verify_against_model(sp: SamplingParams, stop_token_ids: list[int], info: LlmInfo) -> None:
    """vLLM's SamplingParams.verify (default --max-logprobs 20)."""
    vocab = info.vocab_size
    for name, kind in (("logprobs", "sample"), ("prompt_logprobs", "prompt")):
        k = getattr(sp, name)
        if k:
            wanted = vocab if k == -1 else k
            if wanted > MAX_LOGPROBS:
                raise InvalidParameter(
                    f"Requested {kind} logprobs of {wanted}, which is greater than max allowed: "
                    f"{MAX_LOGPROBS}",
                    param=name,
                    value=wanted,
                )
    ids = sp.logprob_token_ids
    if ids is not None:
        if len(ids) > MAX_LOGPROB_TOKEN_IDS:
            raise InvalidRequest(
                f"Requested logprob_token_ids of length {len(ids)}, which is greater than max allowed: "
                f"{MAX_LOGPROB_TOKEN_IDS}",
                param="logprob_token_ids",
            )
        bad_ids = [t for t in ids if not 0 <= t < vocab]
        if bad_ids:
            raise InvalidRequest(
                f"token_id(s) {bad_ids} in logprob_token_ids contain out-of-vocab token ids. Vocabulary "
                f"size: {vocab}",
                param="logprob_token_ids",
            )
    lists = (("stop_token_ids", stop_token_ids), ("logit_bias", list(sp.logit_bias or ())))
    for name, ids in (*lists, ("allowed_token_ids", sp.allowed_token_ids or [])):
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise _range_error(name, f"contains out-of-vocab token ids {bad}; vocabulary size: {vocab}")
    if sp.allowed_token_ids is not None and not sp.allowed_token_ids:
        raise _range_error("allowed_token_ids", "is not None and empty")


def _apply_generation_config(
    sp: SamplingParams, stop_token_ids: list[int], eos: int | None, extra_eos: Sequence[int]
) -> None:
    """vLLM's SamplingParams.update_from_generation_config (including its set ordering)."""
    all_stop = set(stop_token_ids)
    if not sp.ignore_eos:
        sp.eos_token_id = eos
    if eos is not None:
        all_stop.add(eos)
    eos_ids = set(extra_eos)
    if eos is not None:
        eos_ids.discard(eos)
    if eos_ids:
        all_stop.update(eos_ids)
        if not sp.ignore_eos:
            eos_ids.update(stop_token_ids)
            stop_token_ids = list(eos_ids)
    sp.stop_token_ids = stop_token_ids or None
    sp.all_stop_token_ids = sorted(all_stop) or None


def _bad_words_token_ids(bad_words: list[str], tokenizer: TextTokenizer) -> list[list[int]] | None:
    """vLLM's SamplingParams.update_from_tokenizer."""
    if not bad_words:
        return None
    out: list[list[int]] = []
    for word in bad_words:
        for prefix in ("", " "):
            ids = tokenizer.encode(prefix + word.lstrip(), add_special_tokens=False)
            if not ids:
                if not prefix:
                    raise _range_error("bad_words", "entries must tokenize to at least one token")
                continue
            if not prefix or (ids[0] != out[-1][0] and len(ids) == len(out[-1])):
                out.append(ids)
                if len(out) > MAX_NUM_BAD_WORDS:
                    raise _range_error("bad_words", f"has too many words after tokenization: {len(out)}")
    bad = [t for ids in out for t in ids if not 0 <= t <= tokenizer.max_token_id]
    if bad:
        raise _range_error("bad_words", f"tokenize to out-of-vocab ids {bad}")
    return out


def _child(request: TextRequest, prompt: list[int], sp: SamplingParams, index: int) -> GenerateRequest:
    n = request.params.n
    child = sp
    if n > 1 and sp.seed is not None:
        # vLLM's ParentRequest: each child gets the parent seed + its index.
        child = SamplingParams(**{f: getattr(sp, f) for f in sp.__struct_fields__})
        child.seed = sp.seed + index
    kv = request.kv_transfer_params
    if kv is None:
        kv = request.params.kv_transfer_params
    return GenerateRequest(
        request_id=child_request_id(request.request_id, index, n),
        prompt_token_ids=list(prompt),
        sampling_params=child,
        lora_request=request.lora_request,
        mm_features=request.mm_features,
        arrival_time=request.arrival_time,
        cache_salt=request.cache_salt,
        trace_headers=request.trace_headers,
        priority=request.priority,
        data_parallel_rank=request.data_parallel_rank,
        kv_transfer_params=kv,
        reasoning_ended=request.reasoning_ended,
        reasoning_parser_kwargs=request.reasoning_parser_kwargs,
        session_id=request.session_id,
        ec_transfer_params=request.ec_transfer_params,
        # A queue limit admits the n choices at once, with the first, as vLLM's check_admission(n).
        admission_n=n if index == 0 else 0,
    )
