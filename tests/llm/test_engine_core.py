"""EngineCoreLlm against the real vLLM engine core on the tiny model (one engine per session)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from tokenizers import Tokenizer

from tests.llm.harness import collect
from tests.support.engine_recorder import REFUSE_PREFIX, EngineRecorder
from tests.support.vllm_oracle import VllmOracle
from vllm_frontend_testing.tiny_model import build_tiny_lora
from vllm_llm import EngineCoreLlm, InvalidRequest, Llm
from vllm_llm.wire import (
    FinishReason,
    GenerateRequest,
    KvHintAction,
    KvHints,
    LoraRequest,
    MultiModalFeature,
    RepetitionDetection,
    SamplingParams,
    StructuredOutputBackend,
    StructuredOutputs,
    Tensor,
)

PROMPTS = [[1, 286, 669, 596, 267, 653, 650], [1, 80, 1268, 1093], [1, 503, 921, 358, 126, 1058, 603, 1159]]


def _greedy(rid: str, prompt: list[int], **kw: Any) -> GenerateRequest:
    params: dict[str, Any] = {"temperature": 0.0, "max_tokens": 12, "ignore_eos": True} | kw
    return GenerateRequest(request_id=rid, prompt_token_ids=prompt, sampling_params=SamplingParams(**params))


async def test_greedy_tokens_and_logprobs_equal_vllm_generate(
    engine_llm: EngineCoreLlm, vllm_oracle: VllmOracle
) -> None:
    ours = await asyncio.gather(
        *[collect(await engine_llm.generate(_greedy(f"g{i}", p, logprobs=2))) for i, p in enumerate(PROMPTS)]
    )
    theirs = vllm_oracle.generate(
        [(p, {"temperature": 0.0, "max_tokens": 12, "ignore_eos": True, "logprobs": 2}) for p in PROMPTS]
    )
    for got, want in zip(ours, theirs, strict=True):
        choice = want["outputs"][0]
        assert got.token_ids == choice["token_ids"]
        assert got.finish_reason == FinishReason.LENGTH
        assert choice["finish_reason"] == "length"
        rows = [r for o in got.outputs for r in (o.logprobs or [])]
        for row, position in zip(rows, choice["logprobs"], strict=True):
            ours_map = dict(zip(row.token_ids, row.logprobs, strict=True))
            assert set(ours_map) == {token for token, _, _, _ in position}
            for token, logprob, _, _ in position:
                assert ours_map[token] == pytest.approx(logprob, abs=1e-5)


# ---- every field reaches the engine ---------------------------------------------------------------

EMBEDS = Tensor.from_bytes("float32", [2, 128], bytes(range(256)) * 4)

EVERY_FIELD = GenerateRequest(
    request_id=f"{REFUSE_PREFIX}every-field",
    prompt_token_ids=[1, 286, 669],
    sampling_params=SamplingParams(
        temperature=0.7,
        top_p=0.9,
        top_k=7,
        min_p=0.05,
        seed=1234,
        presence_penalty=0.3,
        frequency_penalty=0.4,
        repetition_penalty=1.2,
        max_tokens=9,
        min_tokens=2,
        ignore_eos=True,
        stop_token_ids=[1093, 503],
        eos_token_id=2,
        all_stop_token_ids=[2, 4, 1093, 503],
        bad_words_token_ids=[[921], [358, 126]],
        logprobs=3,
        prompt_logprobs=2,
        logprob_token_ids=[5, 6, 7],
        logit_bias={17: 1.5, 42: -2.0},
        allowed_token_ids=[17, 42, 1093, 503, 921],
        structured_outputs=StructuredOutputs(
            regex="[a-z]+",
            disable_any_whitespace=True,
            disable_additional_properties=True,
            whitespace_pattern=r"[ ]?",
            backend=StructuredOutputBackend.XGRAMMAR,
            backend_was_auto=True,
        ),
        repetition_detection=RepetitionDetection(max_pattern_size=4, min_pattern_size=2, min_count=3),
        thinking_token_budget=5,
        skip_reading_prefix_cache=True,
        extra_args={"custom": [1, 2]},
        stream_interval=3,
    ),
    lora_request=LoraRequest("adapter", 3, "/adapters/x", "base", True, True),
    prompt_embeds=EMBEDS,
    arrival_time=1234.5,
    cache_salt="salt",
    trace_headers={"traceparent": "00-abc-def-01"},
    priority=-3,
    data_parallel_rank=0,
    session_id="session-1",
    resumable=True,
    reasoning_ended=True,
    reasoning_parser_kwargs={"chat_template_kwargs": {"enable_thinking": False}},
    kv_transfer_params={"do_remote_prefill": True, "remote_host": "h"},
    ec_transfer_params={"ec": 1},
    kv_hints=KvHints(
        protocol_version="1",
        message_id="m1",
        actions=[KvHintAction(action_id="a1", action_type="prefetch", action_version="1", payload={"k": 1})],
    ),
    abort_immediately=True,
)

# Multimodal features need a multimodal model: refused here (tested below), lowered on the tiny LLaVA in
# tests/multimodal (equal to vLLM's processor output, through to the engine's cache counters).
# `admission_n` is read by EngineCoreLlm's queue limits, never sent to the engine
# (tests/differential/test_admission.py).
NOT_LOWERED_HERE = {"mm_features", "sampling_params", "admission_n"}


def _sp(ecr: Any) -> Any:
    return ecr.sampling_params


def _so(ecr: Any) -> Any:
    return ecr.sampling_params.structured_outputs


REQUEST_FIELDS: dict[str, Callable[[Any], Any]] = {
    "request_id": lambda e: e.external_req_id,
    "prompt_token_ids": lambda e: e.prompt_token_ids,
    "lora_request": lambda e: LoraRequest(
        e.lora_request.lora_name,
        e.lora_request.lora_int_id,
        e.lora_request.lora_path,
        e.lora_request.base_model_name,
        e.lora_request.load_inplace,
        e.lora_request.is_3d_lora_weight,
    ),
    "prompt_embeds": lambda e: Tensor.from_bytes(
        "float32", list(e.prompt_embeds.shape), e.prompt_embeds.numpy().tobytes()
    ),
    "arrival_time": lambda e: e.arrival_time,
    "cache_salt": lambda e: e.cache_salt,
    "trace_headers": lambda e: dict(e.trace_headers),
    "priority": lambda e: e.priority,
    "data_parallel_rank": lambda e: e.data_parallel_rank,
    "session_id": lambda e: e.session_id,
    "resumable": lambda e: e.resumable,
    "reasoning_ended": lambda e: e.reasoning_ended,
    "reasoning_parser_kwargs": lambda e: e.reasoning_parser_kwargs,
    "kv_transfer_params": lambda e: _sp(e).extra_args["kv_transfer_params"],
    "ec_transfer_params": lambda e: _sp(e).extra_args["ec_transfer_params"],
    "kv_hints": lambda e: KvHints(
        protocol_version=e.kv_hints.protocol_version,
        message_id=e.kv_hints.message_id,
        actions=[
            KvHintAction(
                action_id=a.action_id,
                action_type=a.action_type,
                action_version=a.action_version,
                payload=a.payload,
            )
            for a in e.kv_hints.actions
        ],
    ),
    "abort_immediately": lambda e: e.abort_immediately,
}

SAMPLING_FIELDS: dict[str, Callable[[Any], Any]] = {
    **{
        name: (lambda n: lambda e: getattr(_sp(e), n))(name)
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
            "logprob_token_ids",
            "logit_bias",
            "allowed_token_ids",
            "thinking_token_budget",
            "skip_reading_prefix_cache",
            "stream_interval",
        )
    },
    "stop_token_ids": lambda e: sorted(_sp(e).stop_token_ids),
    "eos_token_id": lambda e: _sp(e)._eos_token_id,
    "all_stop_token_ids": lambda e: sorted(_sp(e)._all_stop_token_ids),
    "bad_words_token_ids": lambda e: _sp(e)._bad_words_token_ids,
    "structured_outputs": lambda e: StructuredOutputs(
        regex=_so(e).regex,
        disable_any_whitespace=_so(e).disable_any_whitespace,
        disable_additional_properties=_so(e).disable_additional_properties,
        whitespace_pattern=_so(e).whitespace_pattern,
        backend=StructuredOutputBackend(_so(e)._backend),
        backend_was_auto=_so(e)._backend_was_auto,
    ),
    "repetition_detection": lambda e: RepetitionDetection(
        max_pattern_size=_sp(e).repetition_detection.max_pattern_size,
        min_pattern_size=_sp(e).repetition_detection.min_pattern_size,
        min_count=_sp(e).repetition_detection.min_count,
    ),
    "extra_args": lambda e: {k: v for k, v in _sp(e).extra_args.items() if k == "custom"},
}


def test_field_tables_cover_the_whole_spec() -> None:
    assert set(REQUEST_FIELDS) | NOT_LOWERED_HERE == set(GenerateRequest.__struct_fields__)
    assert set(SAMPLING_FIELDS) == set(SamplingParams.__struct_fields__)


def assert_arrived_intact(ecr: Any, sent: GenerateRequest) -> None:
    """`ecr`, as the engine core received it, carries every field of `sent` intact."""
    for name, extract in REQUEST_FIELDS.items():
        assert extract(ecr) == getattr(sent, name), name
    for name, extract in SAMPLING_FIELDS.items():
        want = getattr(sent.sampling_params, name)
        if name in ("stop_token_ids", "all_stop_token_ids"):
            want = sorted(want)
        assert extract(ecr) == want, name
    # The engine's own id is a fresh internal one; the external id travels beside it.
    assert ecr.request_id.startswith(f"{sent.request_id}-")


async def taken_before(llm: Llm) -> None:
    """Returns once the engine took every request sent through `llm` before: the engine takes requests
    in order, so a one-token probe's answer comes after the earlier ones were taken (and recorded)."""
    probe = GenerateRequest(
        request_id="taken-probe", prompt_token_ids=[1, 2, 3], sampling_params=SamplingParams(max_tokens=1)
    )
    assert (await collect(await llm.generate(probe))).finish_reason == FinishReason.LENGTH


async def test_every_field_reaches_the_engine_intact(
    engine_llm: EngineCoreLlm, engine_recorder: EngineRecorder
) -> None:
    # Recorded inside the engine-core process, as vLLM decoded it off the ZMQ socket (then refused there:
    # the adapter path does not exist). It is `abort_immediately`: the stream ends at once, with the
    # ABORT output made here, as for any abort (the engine sends nothing for one).
    got = await collect(await engine_llm.generate(EVERY_FIELD))
    assert [o.finish_reason for o in got.outputs] == [FinishReason.ABORT]
    await taken_before(engine_llm)
    assert_arrived_intact(engine_recorder.received_one(EVERY_FIELD.request_id), EVERY_FIELD)


async def test_multimodal_features_need_a_multimodal_model(engine_llm: EngineCoreLlm) -> None:
    feature = MultiModalFeature(modality="image", identifier="x", offset=0, length=1)
    request = msgspec.structs.replace(_greedy("mm", PROMPTS[0]), mm_features=[feature])
    with pytest.raises(InvalidRequest, match="does not take multimodal inputs"):
        await engine_llm.generate(request)
    assert engine_llm.num_in_flight == 0


# ---- real engine behaviour -------------------------------------------------------------------------


async def test_structured_output_choice(engine_llm: EngineCoreLlm, tiny_model_dir: Path) -> None:
    tokenizer = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    choices = ["yes", "no", "maybe"]
    request = GenerateRequest(
        request_id="choice",
        prompt_token_ids=PROMPTS[0],
        sampling_params=SamplingParams(
            temperature=0.0,
            max_tokens=10,
            eos_token_id=2,
            all_stop_token_ids=[2],
            structured_outputs=StructuredOutputs(choice=choices),
        ),
    )
    got = await collect(await engine_llm.generate(request))
    assert got.finish_reason == FinishReason.STOP
    assert tokenizer.decode(got.token_ids, skip_special_tokens=True) in choices


async def test_lora_adapter_load_generate_unload(engine_llm: EngineCoreLlm, tiny_model_dir: Path) -> None:
    lora = LoraRequest("tiny-lora", 7, str(build_tiny_lora(tiny_model_dir)))
    assert await engine_llm.add_lora(lora)
    assert 7 in await engine_llm.list_loras()
    base = await collect(await engine_llm.generate(_greedy("base", PROMPTS[0], max_tokens=8)))
    request = msgspec.structs.replace(_greedy("lora", PROMPTS[0], max_tokens=8), lora_request=lora)
    adapted = await collect(await engine_llm.generate(request))
    assert len(adapted.token_ids) == 8
    assert adapted.token_ids != base.token_ids
    assert await engine_llm.remove_lora(7)
    assert 7 not in await engine_llm.list_loras()


async def test_engine_control_operations(engine_llm: EngineCoreLlm) -> None:
    assert await engine_llm.reset_prefix_cache() is True
    assert await engine_llm.collective_rpc("check_health") == [None]
    assert engine_llm.kv_event_sources() == {}
    readiness = engine_llm.subscribe_readiness()
    await engine_llm.pause(mode="keep")
    assert await engine_llm.is_paused() is True
    assert readiness.value is False
    await engine_llm.resume()
    assert await engine_llm.is_paused() is False
    assert readiness.value is True
    await engine_llm.sleep(level=1)
    assert await engine_llm.is_sleeping() is True
    assert readiness.value is False
    await engine_llm.wake_up()
    assert await engine_llm.is_sleeping() is False
    assert readiness.value is True
    got = await collect(await engine_llm.generate(_greedy("after-wake", PROMPTS[1], max_tokens=3)))
    assert got.finish_reason == FinishReason.LENGTH


async def test_prompt_logprobs_and_cached_tokens(engine_llm: EngineCoreLlm) -> None:
    prompt = [1, *range(300, 440)]
    first = await collect(
        await engine_llm.generate(_greedy("plp-1", prompt, max_tokens=2, prompt_logprobs=1))
    )
    info = first.outputs[0].prompt_info
    assert info is not None
    assert info.prompt_logprobs is not None
    assert len(info.prompt_logprobs) == len(prompt) - 1
    assert [r.token_ids[0] for r in info.prompt_logprobs] == prompt[1:]
    written = info.num_cache_creation_tokens
    again = await collect(await engine_llm.generate(_greedy("plp-2", prompt, max_tokens=2)))
    info = again.outputs[0].prompt_info
    assert info is not None
    assert info.num_cached_tokens > 0
    # what the first wrote to the prefix cache is what the second finds there (vLLM's PrefillStats)
    assert written == info.num_cached_tokens and info.num_cache_creation_tokens == 0
