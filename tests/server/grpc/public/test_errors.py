"""Bad input to vllm.Inference ends the call with INVALID_ARGUMENT (NOT_FOUND for an unknown model)."""

from __future__ import annotations

import grpc
import pytest

from tests.support.public_grpc import PublicClient
from vllm_server.grpc.proto import inference_pb2 as pb

STOP4 = pb.StoppingCriteria(max_new_tokens=4)

INVALID = {
    "no prompt": pb.GenerateRequest(stopping=STOP4),
    "empty token ids": pb.GenerateRequest(token_ids=pb.TokenIds(ids=[]), stopping=STOP4),
    "token out of vocabulary": pb.GenerateRequest(token_ids=pb.TokenIds(ids=[1, 10_000_000]), stopping=STOP4),
    "max_new_tokens past the context": pb.GenerateRequest(
        text="hi", stopping=pb.StoppingCriteria(max_new_tokens=100_000)
    ),
    "prompt too long": pb.GenerateRequest(token_ids=pb.TokenIds(ids=[300] * 600), stopping=STOP4),
    "negative temperature": pb.GenerateRequest(text="hi", temperature=-1.0, stopping=STOP4),
    "top_p above 1": pb.GenerateRequest(text="hi", sampling=pb.RandomSampling(top_p=1.5), stopping=STOP4),
    "invalid json schema": pb.GenerateRequest(
        text="hi", decoding=pb.DecodingParameters(json="{not json"), stopping=STOP4
    ),
    "too many logprobs": pb.GenerateRequest(
        text="hi",
        response=pb.ResponseOptions(output_logprobs=True, output_candidates=pb.CandidateTokens(top_n=1000)),
        stopping=STOP4,
    ),
    "candidates by token ids": pb.GenerateRequest(
        text="hi",
        response=pb.ResponseOptions(
            output_logprobs=True, output_candidates=pb.CandidateTokens(token_ids=pb.TokenIds(ids=[5]))
        ),
        stopping=STOP4,
    ),
    "greedy with several sequences": pb.GenerateRequest(
        text="hi", temperature=0.0, sampling=pb.RandomSampling(num_sequences=2), stopping=STOP4
    ),
    "media": pb.GenerateRequest(
        token_ids=pb.TokenIds(ids=[1, 300]),
        media=[pb.MediaItem(modality=pb.MODALITY_IMAGE, url="https://example.invalid/cat.png")],
        stopping=STOP4,
    ),
}


@pytest.mark.parametrize("case", sorted(INVALID))
async def test_invalid_requests(client: PublicClient, case: str) -> None:
    request = INVALID[case]
    with pytest.raises(grpc.aio.AioRpcError) as unary:
        await client.inference.Generate(request)
    assert unary.value.code() == grpc.StatusCode.INVALID_ARGUMENT, unary.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as streamed:
        await client.stream(request)
    assert streamed.value.code() == grpc.StatusCode.INVALID_ARGUMENT, streamed.value.details()


async def test_unary_generate_holds_one_sequence(client: PublicClient) -> None:
    request = pb.GenerateRequest(
        text="hi", temperature=1.0, sampling=pb.RandomSampling(num_sequences=2), stopping=STOP4
    )
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await client.inference.Generate(request)
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "GenerateStream" in (exc.value.details() or "")


async def test_unknown_model_is_not_found(client: PublicClient) -> None:
    request = pb.GenerateRequest(model="no-such-model", text="hi", stopping=STOP4)
    with pytest.raises(grpc.aio.AioRpcError) as unary:
        await client.inference.Generate(request)
    assert unary.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.aio.AioRpcError) as streamed:
        await client.stream(request)
    assert streamed.value.code() == grpc.StatusCode.NOT_FOUND


async def test_bypass_prefix_cache_is_unimplemented(worker_client: PublicClient) -> None:
    request = pb.GenerateRequest(text="hi", kv=pb.KVCacheParameters(bypass_prefix_cache=True), stopping=STOP4)
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await worker_client.inference.Generate(request)
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED
