"""Lowering of TextSamplingParams, against vLLM's own serving layer and SamplingParams as the oracle."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tests.support.engine import TINY_MAX_MODEL_LEN as MAX_MODEL_LEN
from tests.support.quiet_import import quietly_import
from vllm_llm import InvalidRequest, MockLlm, PromptTooLong
from vllm_llm.text import TextLlm, TextRequest, TextSamplingParams
from vllm_llm.wire import GenerationDefaults, LlmInfo, SamplingParams, StructuredOutputs

PROMPT = [1, 47, 76, 374, 86, 849, 336]


def vllm_lowered(
    params: dict[str, Any], info: LlmInfo, generation_config: dict[str, Any], vllm_tokenizer: Any
) -> Any:
    """vLLM's SamplingParams for an OpenAI completion request with `params`, lowered as its engine does."""
    protocol = quietly_import("vllm.entrypoints.openai.completion.protocol")
    api_utils = quietly_import("vllm.entrypoints.serve.utils.api_utils")
    defaults = info.generation_defaults or GenerationDefaults()
    diff = {k: v for k, v in (("max_tokens", defaults.max_tokens), *_items(defaults)) if v is not None}
    fields = dict(params)
    if fields.get("logit_bias") is not None:
        fields["logit_bias"] = {str(k): v for k, v in fields["logit_bias"].items()}
    request = protocol.CompletionRequest(model="tiny", prompt=PROMPT, **fields)
    # None as the chat endpoint has it (the completions endpoint defaults to 16 before this point).
    max_tokens = api_utils.get_max_tokens(MAX_MODEL_LEN, params.get("max_tokens"), len(PROMPT), diff)
    sp = request.to_sampling_params(max_tokens, diff)
    sp.update_from_generation_config(generation_config, vllm_tokenizer.eos_token_id)
    sp.update_from_tokenizer(vllm_tokenizer)
    return sp


def _items(defaults: GenerationDefaults) -> list[tuple[str, Any]]:
    return [(f, getattr(defaults, f)) for f in defaults.__struct_fields__ if f != "max_tokens"]


def assert_same(ours: SamplingParams, theirs: Any) -> None:
    for name in (
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "repetition_penalty",
        "max_tokens",
        "min_tokens",
        "ignore_eos",
        "logprobs",
        "prompt_logprobs",
        "logit_bias",
        "allowed_token_ids",
        "skip_reading_prefix_cache",
    ):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert (ours.stop_token_ids or []) == theirs.stop_token_ids
    assert ours.eos_token_id == theirs.eos_token_id
    assert set(ours.all_stop_token_ids or []) == theirs.all_stop_token_ids
    assert ours.bad_words_token_ids == theirs.bad_words_token_ids


CASES: list[dict[str, Any]] = [
    {},
    {"temperature": 0.0},
    {"temperature": 0.0, "top_p": 0.5, "top_k": 3, "min_p": 0.2},
    {"temperature": 0.005},
    {"temperature": 1.3, "top_p": 0.7, "top_k": -1, "min_p": 0.05, "seed": 7},
    {"seed": -1},
    {"max_tokens": 10_000},
    {"max_tokens": 5, "min_tokens": 2},
    {"presence_penalty": 1.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2},
    {"stop_token_ids": [9, 4, 9, 30]},
    {"stop_token_ids": [9, 30], "ignore_eos": True},
    {"ignore_eos": True},
    {"logprobs": 3, "prompt_logprobs": 0},
    {"logprobs": 0},
    {"logit_bias": {5: 150.0, 6: -3.0}, "allowed_token_ids": [16, 17, 2]},
    {"bad_words": ["the cat", " dog", "apple", "the cat"]},
    {"bad_words": ["Hello"], "stop": ["x", "yz", "x"]},
]


@pytest.mark.parametrize("params", CASES, ids=[str(c) for c in CASES])
def test_lowering_matches_vllm(
    params: dict[str, Any],
    text_llm: TextLlm,
    tiny_info: LlmInfo,
    generation_config: dict[str, Any],
    vllm_tokenizer: Any,
) -> None:
    ours = text_llm.lower(TextRequest(request_id="r", prompt=PROMPT, params=TextSamplingParams(**params)))
    assert len(ours) == 1
    assert ours[0].request_id == "r"
    assert ours[0].prompt_token_ids == PROMPT
    assert_same(ours[0].sampling_params, vllm_lowered(params, tiny_info, generation_config, vllm_tokenizer))


def test_generation_defaults_fill_unset_params(
    text_llm: TextLlm, generation_config: dict[str, Any], hf_tokenizer: Any
) -> None:
    (req,) = text_llm.lower(TextRequest(request_id="d", prompt=PROMPT))
    sp = req.sampling_params
    # The model's generation_config.json, not SamplingParams' own defaults (1.0, 1.0, 0 / -1).
    expected = [generation_config[k] for k in ("temperature", "top_p", "top_k")]
    assert [sp.temperature, sp.top_p, sp.top_k] == expected
    assert expected != [1.0, 1.0, 0] and expected != [1.0, 1.0, -1]
    assert sp.min_p == generation_config.get("min_p", 0.0)
    assert sp.max_tokens == MAX_MODEL_LEN - len(PROMPT)
    # The tokenizer's eos is the eos; the config's other eos ids are stop ids, as vLLM's
    # update_from_generation_config makes them.
    eos = hf_tokenizer.eos_token_id
    config_eos = generation_config["eos_token_id"]
    assert sp.eos_token_id == eos
    assert sp.stop_token_ids == [t for t in config_eos if t != eos]
    assert sp.stop_token_ids
    assert sorted(sp.all_stop_token_ids or []) == sorted({eos, *config_eos})


def test_text_prompt_is_tokenized_with_bos(text_llm: TextLlm, hf_tokenizer: Any) -> None:
    text = "Hello world, the cat sees <|user|> a dog"
    (req,) = text_llm.lower(TextRequest(request_id="t", prompt=text))
    assert req.prompt_token_ids == hf_tokenizer.encode(text)
    assert req.prompt_token_ids[0] == 1
    (plain,) = text_llm.lower(TextRequest(request_id="t", prompt=text, add_special_tokens=False))
    assert plain.prompt_token_ids == hf_tokenizer.encode(text, add_special_tokens=False)


async def test_max_tokens_defaults_from_generation_config(tiny_info: LlmInfo) -> None:
    info = LlmInfo(**{f: getattr(tiny_info, f) for f in tiny_info.__struct_fields__})
    info.generation_defaults = GenerationDefaults(max_tokens=7)
    llm = TextLlm(MockLlm(info=info))
    (req,) = llm.lower(TextRequest(request_id="m", prompt=PROMPT))
    assert req.sampling_params.max_tokens == 7
    (req,) = llm.lower(TextRequest(request_id="m", prompt=PROMPT, params=TextSamplingParams(max_tokens=20)))
    assert req.sampling_params.max_tokens == 20
    (req,) = llm.lower(TextRequest(request_id="m", prompt=list(range(8, 8 + 508))))
    assert req.sampling_params.max_tokens == 4


async def test_thinking_token_budget_needs_an_engine_with_a_reasoning_parser(tiny_info: LlmInfo) -> None:
    """As vLLM's input processor: refused (its message) unless the engine has a reasoning parser, which
    LlmInfo reports; -1 is unlimited. The reasoning flags of the chat layer travel with the request."""

    def lowered(info: LlmInfo, budget: int) -> SamplingParams:
        request = TextRequest(
            request_id="t",
            prompt=PROMPT,
            params=TextSamplingParams(thinking_token_budget=budget),
            reasoning_ended=False,
            reasoning_parser_kwargs={"chat_template_kwargs": {"enable_thinking": True}},
        )
        (req,) = TextLlm(MockLlm(info=info)).lower(request)
        assert req.reasoning_ended is False
        assert req.reasoning_parser_kwargs == {"chat_template_kwargs": {"enable_thinking": True}}
        return req.sampling_params

    with pytest.raises(
        InvalidRequest, match="thinking_token_budget is set but reasoning_config is not configured"
    ):
        lowered(tiny_info, 10)
    assert lowered(tiny_info, -1).thinking_token_budget is None
    reasoning = msgspec.structs.replace(tiny_info, reasoning_parser="deepseek_r1")
    assert lowered(reasoning, 10).thinking_token_budget == 10
    assert lowered(reasoning, 0).thinking_token_budget == 0


def test_prompt_too_long(text_llm: TextLlm) -> None:
    with pytest.raises(PromptTooLong) as info:
        text_llm.lower(TextRequest(request_id="p", prompt=[16] * MAX_MODEL_LEN))
    assert info.value.param == "prompt"
    assert info.value.prompt_len == MAX_MODEL_LEN
    # One token of room is enough.
    (req,) = text_llm.lower(TextRequest(request_id="p", prompt=[16] * (MAX_MODEL_LEN - 1)))
    assert req.sampling_params.max_tokens == 1


def test_n_children_ids_and_seeds(text_llm: TextLlm) -> None:
    reqs = text_llm.lower(
        TextRequest(request_id="par", prompt=PROMPT, params=TextSamplingParams(n=3, seed=11))
    )
    assert [r.request_id for r in reqs] == ["0_par", "1_par", "2_par"]
    assert [r.sampling_params.seed for r in reqs] == [11, 12, 13]
    unseeded = text_llm.lower(TextRequest(request_id="u", prompt=PROMPT, params=TextSamplingParams(n=2)))
    assert [r.sampling_params.seed for r in unseeded] == [None, None]
    # A queue limit admits the choices at once, with the first (vLLM's check_admission(n)).
    assert [r.admission_n for r in reqs] == [3, 0, 0]
    (single,) = text_llm.lower(TextRequest(request_id="s", prompt=PROMPT))
    assert single.admission_n == 1


def test_request_options_pass_through(text_llm: TextLlm) -> None:
    (req,) = text_llm.lower(
        TextRequest(
            request_id="o",
            prompt=PROMPT,
            cache_salt="salt",
            priority=3,
            trace_headers={"traceparent": "x"},
            params=TextSamplingParams(
                kv_transfer_params={"do_remote_prefill": True},
                extra_args={"k": 1},
                structured_outputs=StructuredOutputs(regex="[a-z]+"),
            ),
        )
    )
    assert (req.cache_salt, req.priority, req.trace_headers) == ("salt", 3, {"traceparent": "x"})
    assert req.kv_transfer_params == {"do_remote_prefill": True}
    assert req.sampling_params.extra_args == {"k": 1}
    assert req.sampling_params.structured_outputs == StructuredOutputs(regex="[a-z]+")


BAD: list[tuple[dict[str, Any], str]] = [
    ({"max_tokens": 0}, "max_tokens"),
    ({"max_tokens": -3}, "max_tokens"),
    ({"min_tokens": -1}, "min_tokens"),
    ({"min_tokens": 9, "max_tokens": 4}, "min_tokens"),
    ({"temperature": -0.1}, "temperature"),
    ({"temperature": 2.5}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"top_p": 0.0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"top_k": -2}, "top_k"),
    ({"min_p": 1.5}, "min_p"),
    ({"presence_penalty": 3.0}, "presence_penalty"),
    ({"frequency_penalty": -2.5}, "frequency_penalty"),
    ({"repetition_penalty": 0.0}, "repetition_penalty"),
    ({"logprobs": 21}, "logprobs"),
    ({"logprobs": -1}, "logprobs"),
    ({"logprobs": -2}, "logprobs"),
    ({"prompt_logprobs": 50}, "prompt_logprobs"),
    ({"stop": ["ok", ""]}, "stop"),
    ({"bad_words": [""]}, "bad_words"),
    ({"stop_token_ids": [5, 99_999]}, "stop_token_ids"),
    ({"stop_token_ids": [-1]}, "stop_token_ids"),
    ({"logit_bias": {100_000: 1.0}}, "logit_bias"),
    ({"allowed_token_ids": []}, "allowed_token_ids"),
    ({"allowed_token_ids": [1, 5000]}, "allowed_token_ids"),
    ({"structured_outputs": StructuredOutputs(regex="a", grammar="b")}, "structured_outputs"),
]


@pytest.mark.parametrize(("params", "param"), BAD, ids=[f"{p}-{k}" for p, k in BAD])
async def test_invalid_params_name_the_param(
    params: dict[str, Any], param: str, text_llm: TextLlm, mock_llm: MockLlm
) -> None:
    with pytest.raises(InvalidRequest) as info:
        await text_llm.generate(
            TextRequest(request_id="bad", prompt=PROMPT, params=TextSamplingParams(**params))
        )
    assert info.value.param == param
    assert param in info.value.message
    assert mock_llm.requests == []


#: Refusals worded as vLLM's (its VLLMValidationError's `str`, the parameter it names, None for n).
VLLM_WORDED: list[dict[str, Any]] = [
    {"n": 0},
    {"n": 16_385},
    {"n": 2, "temperature": 0.0},
    {"max_tokens": 0},
    {"max_tokens": -1},
    {"temperature": -1.0},
    {"temperature": 2.5},
    {"temperature": float("inf")},
    {"top_p": 0.0},
]


@pytest.mark.parametrize("params", VLLM_WORDED, ids=[str(p) for p in VLLM_WORDED])
async def test_invalid_params_worded_as_vllm(
    params: dict[str, Any],
    text_llm: TextLlm,
    tiny_info: LlmInfo,
    generation_config: dict[str, Any],
    vllm_tokenizer: Any,
) -> None:
    exceptions = quietly_import("vllm.exceptions")
    with pytest.raises(exceptions.VLLMValidationError) as theirs:
        vllm_lowered(params, tiny_info, generation_config, vllm_tokenizer)
    with pytest.raises(InvalidRequest) as ours:
        await text_llm.generate(
            TextRequest(request_id="bad", prompt=PROMPT, params=TextSamplingParams(**params))
        )
    assert (ours.value.message, ours.value.param) == (str(theirs.value), theirs.value.parameter)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        (
            {"logprobs": 21},
            "Requested sample logprobs of 21, which is greater than max allowed: 20 (parameter=logprobs, "
            "value=21)",
        ),
        (
            {"prompt_logprobs": 50},
            "Requested prompt logprobs of 50, which is greater than max allowed: 20 "
            "(parameter=prompt_logprobs, value=50)",
        ),
    ],
)
async def test_logprobs_over_the_limit_worded_as_vllm(
    params: dict[str, Any], message: str, text_llm: TextLlm
) -> None:
    """vLLM's SamplingParams.verify (it needs a ModelConfig, so its words are written out here)."""
    with pytest.raises(InvalidRequest) as info:
        await text_llm.generate(
            TextRequest(request_id="bad", prompt=PROMPT, params=TextSamplingParams(**params))
        )
    assert info.value.message == message


@pytest.mark.parametrize("prompt", [[], [1, 5, 1_000_000], ""], ids=["empty", "out-of-vocab", "empty-text"])
async def test_invalid_prompt(prompt: list[int] | str, text_llm: TextLlm, mock_llm: MockLlm) -> None:
    with pytest.raises(InvalidRequest) as info:
        await text_llm.generate(TextRequest(request_id="bad", prompt=prompt, add_special_tokens=False))
    assert info.value.param == "prompt"
    assert mock_llm.requests == []
