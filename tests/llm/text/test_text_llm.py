"""TextLlm over MockLlm: streaming deltas, stop strings and engine aborts, logprobs, n > 1, usage."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.support.timing import PATIENCE
from vllm_llm import MockLlm
from vllm_llm.text import TextDelta, TextLlm, TextRequest, TextSamplingParams

PROMPT = [1, 47, 76, 374, 86, 849, 336]


def request(request_id: str, **params: Any) -> TextRequest:
    return TextRequest(request_id=request_id, prompt=PROMPT, params=TextSamplingParams(**params))


async def engine_idle(mock_llm: MockLlm) -> None:
    """Wait until the engine runs no request (an abort reaches it asynchronously)."""
    await asyncio.wait_for(mock_llm.subscribe_running().wait_for(lambda n: n == 0), PATIENCE)


async def free_run(text_llm: TextLlm, mock_llm: MockLlm, n: int = 30) -> list[int]:
    """The tokens the mock produces for PROMPT (no stop conditions)."""
    return [mock_llm.token_at(PROMPT, i) for i in range(n)]


async def test_stream_text_equals_decode(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    stream = await text_llm.generate(request("a", max_tokens=12, ignore_eos=True))
    deltas = [d async for d in stream]
    assert deltas[0].prompt_token_ids == PROMPT
    assert all(d.prompt_token_ids is None for d in deltas[1:])
    tokens = [t for d in deltas for t in d.token_ids]
    assert tokens == (await free_run(text_llm, mock_llm))[:12]
    assert "".join(d.text for d in deltas) == text_llm.decode(tokens)
    final = deltas[-1]
    assert (final.finish_reason, final.stop_reason) == ("length", None)
    assert final.usage is not None
    assert (final.usage.prompt_tokens, final.usage.completion_tokens) == (len(PROMPT), 12)
    assert stream.usage == final.usage


@pytest.mark.parametrize("include", [False, True])
async def test_stop_string_finishes_and_aborts_the_engine(
    include: bool, text_llm: TextLlm, mock_llm: MockLlm
) -> None:
    tokens = await free_run(text_llm, mock_llm)
    full = text_llm.decode(tokens)
    stop = full[20:23]
    at = full.index(stop)
    result = await text_llm.complete(
        request("s", max_tokens=30, ignore_eos=True, stop=[stop], include_stop_str_in_output=include)
    )
    (choice,) = result.choices
    assert (choice.finish_reason, choice.stop_reason) == ("stop", stop)
    assert choice.text == (full[: at + len(stop)] if include else full[:at])
    # Tokens end with the one completing the stop string.
    kept = choice.token_ids
    assert kept == tokens[: len(kept)]
    assert stop in text_llm.decode(kept)[at:]
    assert stop not in text_llm.decode(kept[:-1])[at:] or len(text_llm.decode(kept[:-1])) > at + len(stop)
    await engine_idle(mock_llm)
    assert mock_llm.aborted == ["s"]  # ended by the abort, not at max_tokens
    assert mock_llm.num_running == 0
    assert result.usage.completion_tokens == len(kept)


async def test_stop_string_text_is_held_back_in_deltas(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    tokens = await free_run(text_llm, mock_llm)
    full = text_llm.decode(tokens)
    stop = full[25:30]
    stream = await text_llm.generate(request("h", max_tokens=30, ignore_eos=True, stop=[stop, "zz"]))
    seen = ""
    seen_tokens: list[int] = []
    async for d in stream:
        seen += d.text
        seen_tokens.extend(d.token_ids)
        if d.finish_reason is None:
            # The last len(stop) - 1 chars so far are held back: they could begin the stop string (and an
            # unfinished UTF-8 sequence at the end is no character yet).
            so_far = text_llm.decode(seen_tokens).rstrip("\ufffd")
            assert seen == so_far[: len(so_far) - (len(stop) - 1)]
    assert seen == full[: full.index(stop)]


async def test_stop_string_respects_min_tokens(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    tokens = await free_run(text_llm, mock_llm)
    first_piece = text_llm.decode(tokens[:1])
    stop = first_piece.strip()[:2]
    early = await text_llm.complete(request("e", max_tokens=10, ignore_eos=True, stop=[stop]))
    assert early.choices[0].stop_reason == stop
    assert early.choices[0].token_ids == tokens[:1]
    late = await text_llm.complete(request("l", max_tokens=10, ignore_eos=True, stop=[stop], min_tokens=6))
    # The match in the first token is never checked: stop strings count only past min_tokens tokens.
    full = text_llm.decode(tokens[:10])
    later = full.find(stop, len(text_llm.decode(tokens[:6])) - len(stop) + 1)
    if later == -1:
        assert late.choices[0].finish_reason == "length"
        assert late.choices[0].text == full
    else:
        assert late.choices[0].text == full[:later]


async def test_stop_token_id_is_not_in_text(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    tokens = await free_run(text_llm, mock_llm)
    stop_id = tokens[4]
    result = await text_llm.complete(request("t", max_tokens=20, ignore_eos=True, stop_token_ids=[stop_id]))
    (choice,) = result.choices
    assert (choice.finish_reason, choice.stop_reason) == ("stop", stop_id)
    assert choice.token_ids == tokens[:5]
    assert choice.text == text_llm.decode(tokens[:4])
    shown = await text_llm.complete(
        request(
            "t2", max_tokens=20, ignore_eos=True, stop_token_ids=[stop_id], include_stop_str_in_output=True
        )
    )
    assert shown.choices[0].text == text_llm.decode(tokens[:5])


async def test_logprobs_carry_decoded_tokens(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    result = await text_llm.complete(
        request("lp", max_tokens=6, ignore_eos=True, logprobs=3, prompt_logprobs=2)
    )
    (choice,) = result.choices
    assert choice.logprobs is not None and len(choice.logprobs) == 6
    for token, pos in zip(choice.token_ids, choice.logprobs, strict=True):
        assert pos.token_id == token
        assert pos.candidates[0].token_id == token
        assert len(pos.candidates) <= 4
        alone = text_llm.tokenizer.decode_each([c.token_id for c in pos.candidates])
        for candidate, decoded in zip(pos.candidates, alone, strict=True):
            # a token that is part of a character is corrected from its context, as vLLM does
            # (test_parity_vllm compares those with vLLM's own)
            if not decoded.endswith("\ufffd"):
                assert candidate.token == decoded
    assert choice.cumulative_logprob == pytest.approx(sum(p.logprob for p in choice.logprobs))
    assert result.prompt_logprobs is not None
    assert result.prompt_logprobs[0] is None
    assert [p.token_id for p in result.prompt_logprobs[1:] if p is not None] == PROMPT[1:]
    assert mock_llm.requests[0].sampling_params.logprobs == 3


async def test_n2_merges_choices_by_index(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    stream = await text_llm.generate(request("n", n=2, seed=5, max_tokens=4, ignore_eos=True))
    deltas: list[TextDelta] = [d async for d in stream]
    assert sorted({d.index for d in deltas}) == [0, 1]
    assert [r.request_id for r in mock_llm.requests] == ["0_n", "1_n"]
    assert [r.sampling_params.seed for r in mock_llm.requests] == [5, 6]
    for i in (0, 1):
        mine = [d for d in deltas if d.index == i]
        assert mine[0].prompt_token_ids == PROMPT
        assert mine[-1].finish_reason == "length"
        assert sum(len(d.token_ids) for d in mine) == 4
    assert deltas[-1].usage is not None
    assert deltas[-1].usage.completion_tokens == 8
    assert sum(d.usage is not None for d in deltas) == 1


async def test_closing_the_stream_aborts_every_choice(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    mock_llm.step_interval = 0.01
    stream = await text_llm.generate(request("c", n=2, max_tokens=400, ignore_eos=True))
    await stream.__anext__()
    await stream.aclose()
    await engine_idle(mock_llm)
    assert sorted(mock_llm.aborted) == ["0_c", "1_c"]  # ended by the abort, not at max_tokens
    assert mock_llm.num_running == 0


async def test_abort_by_request_id(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    mock_llm.step_interval = 0.01
    stream = await text_llm.generate(request("ab", n=2, max_tokens=400, ignore_eos=True))
    await stream.__anext__()
    await text_llm.abort(["ab"])
    deltas = [d async for d in stream]
    finals = {d.index: d.finish_reason for d in deltas if d.finish_reason is not None}
    assert finals == {0: "abort", 1: "abort"}
    assert sorted(mock_llm.aborted) == ["0_ab", "1_ab"]
    single = await text_llm.generate(request("one", max_tokens=400, ignore_eos=True))
    await single.__anext__()
    await text_llm.abort(["one"])
    assert [d.finish_reason async for d in single][-1] == "abort"


async def test_eos_finishes_with_stop_and_no_reason(text_llm: TextLlm, mock_llm: MockLlm) -> None:
    tokens = await free_run(text_llm, mock_llm)
    info = mock_llm.info()
    eos_info = type(info)(**{f: getattr(info, f) for f in info.__struct_fields__})
    eos_info.eos_token_id = tokens[3]
    llm = TextLlm(MockLlm(info=eos_info))
    result = await llm.complete(request("eos", max_tokens=20))
    (choice,) = result.choices
    assert (choice.finish_reason, choice.stop_reason) == ("stop", None)
    assert choice.token_ids == tokens[:4]
    assert choice.text == llm.decode(tokens[:3]).rstrip("\ufffd")  # an unfinished character never shows
    ignored = await llm.complete(request("eos2", max_tokens=8, ignore_eos=True))
    assert ignored.choices[0].token_ids == tokens[:8]
