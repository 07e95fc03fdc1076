"""The checks vLLM's InputProcessor makes of a request's sampling parameters against the engine's config
(`_validate_params`), made by our lowering in vLLM's words: on vLLM's own VllmConfig, built from the
engine flags as `vllm serve` builds it (no engine starts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vllm_llm import EngineCoreSettings, InvalidRequest
from vllm_llm.engine_core._lowering import Lowering
from vllm_llm.wire import GenerateRequest, SamplingParams

MASK_TEMPERATURE = "sampling distribution replay requires temperature > 0"
MASK_TOP_K = (
    "sampling distribution replay requires top_k > 0 to bound sampling mask size, reduce transfer overhead, "
    "and avoid potential OOMs"
)


def _lowering(model: Path, *, sampling_mask: bool = False, **engine_args: Any) -> Lowering:
    config = EngineCoreSettings(model=str(model), engine_args=engine_args).engine_config()
    if sampling_mask:
        # `--return-sampling-mask` needs Model Runner V2, which needs Triton (a GPU): vLLM refuses the flag
        # here at config time, so the built config gets it set as a GPU worker's has it.
        config.model_config.return_sampling_mask = True
    return Lowering(config, tokenizer=None)


def _request(**params: Any) -> GenerateRequest:
    sampling = SamplingParams(**({"max_tokens": 4} | params))
    return GenerateRequest(request_id="r", prompt_token_ids=[1, 2, 3], sampling_params=sampling)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"temperature": 0.0, "top_k": 5}, MASK_TEMPERATURE),
        ({"temperature": 1.0}, MASK_TOP_K),  # top_k unset: every token
        ({"temperature": 1.0, "top_k": -1}, MASK_TOP_K),
        ({"temperature": 1.0, "top_k": 5}, None),
    ],
)
def test_a_sampling_mask_engine_takes_only_bounded_sampling(
    tiny_model_dir: Path, params: dict[str, Any], message: str | None
) -> None:
    lowering = _lowering(tiny_model_dir, sampling_mask=True)
    if message is None:
        lowered = lowering.lower(_request(**params), "r-0").sampling_params
        assert lowered is not None and lowered.top_k == 5
    else:
        with pytest.raises(InvalidRequest) as refused:
            lowering.lower(_request(**params), "r-0")
        assert str(refused.value) == message
    # Without --return-sampling-mask the same request is lowered.
    assert _lowering(tiny_model_dir).lower(_request(**params), "r-0") is not None


def test_custom_logits_processors_check_their_arguments(tiny_model_dir: Path) -> None:
    lowering = _lowering(tiny_model_dir, logits_processors=["tests.support.logitsprocs:OnlyToken"])
    with pytest.raises(InvalidRequest) as refused:
        lowering.lower(_request(extra_args={"only_token": "seven"}), "r-0")
    assert str(refused.value) == "only_token must be a non-negative int, not 'seven'"
    lowered = lowering.lower(_request(extra_args={"only_token": 7}), "r-0").sampling_params
    assert lowered is not None and lowered.extra_args == {"only_token": 7}
    # An engine without the processor does not check its arguments (vLLM's neither).
    assert _lowering(tiny_model_dir).lower(_request(extra_args={"only_token": "seven"}), "r-0") is not None
