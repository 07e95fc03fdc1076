"""Every GenerateRequest field reaches the Llm as the equivalent HTTP request's (recorded by a MockLlm)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest_asyncio

from tests.support.mock import tiny_mock
from tests.support.public_grpc import PublicClient, public_client
from tests.support.servers import RunningServer, start_server
from vllm_llm import MockLlm
from vllm_llm.wire import GenerateRequest
from vllm_server.config import ServerConfig
from vllm_server.grpc.proto import inference_pb2 as pb
from vllm_server.grpc.proto_struct import dict_to_struct, struct_to_dict
from vllm_server.source import LlmSource

KV = {"do_remote_prefill": True, "remote_block_ids": [1, 2, 3], "remote_port": 5557, "ratio": 0.5, "x": None}


@pytest_asyncio.fixture(loop_scope="session")
async def mock_served(tiny_model_dir: Path) -> AsyncIterator[tuple[PublicClient, httpx.AsyncClient, MockLlm]]:
    """A server over a provided MockLlm, with its public gRPC client and HTTP client."""
    mock = tiny_mock(tiny_model_dir)
    server: RunningServer = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock))
    async with (
        public_client(server.grpc_target) as client,
        httpx.AsyncClient(base_url=server.base_url, timeout=30) as http,
    ):
        yield client, http, mock
    await server.stop()
    await mock.shutdown()


def _without_id(request: GenerateRequest) -> dict[str, Any]:
    fields: dict[str, Any] = msgspec.to_builtins(request)
    fields.pop("request_id")
    fields.pop("arrival_time", None)
    return fields


async def test_every_field_lowers_as_the_http_request(
    mock_served: tuple[PublicClient, httpx.AsyncClient, MockLlm],
) -> None:
    client, http, mock = mock_served
    r = await http.post(
        "/v1/completions",
        json={
            "model": "tiny",
            "prompt": [1, 300, 301, 302],
            "temperature": 0.7,
            "top_p": 0.9,
            "top_k": 5,
            "min_p": 0.05,
            "seed": 11,
            "presence_penalty": 0.5,
            "frequency_penalty": 0.25,
            "repetition_penalty": 1.1,
            "logit_bias": {"7": 2.0},
            "allowed_token_ids": [7, 8, 9, 300],
            "max_tokens": 6,
            "min_tokens": 2,
            "stop_token_ids": [9],
            "ignore_eos": True,
            "logprobs": 2,
            "prompt_logprobs": 1,
            "structured_outputs": {"regex": "[a-z]+"},
            "cache_salt": "salt",
            "priority": 3,
            "kv_transfer_params": KV,
        },
    )
    assert r.status_code == 200, r.text
    via_http = mock.requests[-1]
    await client.inference.Generate(
        pb.GenerateRequest(
            request_id="public-fields",
            token_ids=pb.TokenIds(ids=[1, 300, 301, 302]),
            temperature=0.7,
            sampling=pb.RandomSampling(top_p=0.9, top_k=5, min_p=0.05, seed=11),
            decoding=pb.DecodingParameters(
                presence_penalty=0.5,
                frequency_penalty=0.25,
                repetition_penalty=1.1,
                logit_bias={7: 2.0},
                allowed_token_ids=[7, 8, 9, 300],
                regex="[a-z]+",
            ),
            stopping=pb.StoppingCriteria(
                max_new_tokens=6, min_new_tokens=2, stop_token_ids=[9], ignore_eos=True
            ),
            response=pb.ResponseOptions(
                output_logprobs=True,
                output_candidates=pb.CandidateTokens(top_n=2),
                prompt_logprobs=True,
                prompt_candidates=pb.CandidateTokens(top_n=1),
            ),
            kv=pb.KVCacheParameters(cache_salt="salt", kv_transfer_params=dict_to_struct(KV)),
            priority=3,
        )
    )
    via_grpc = mock.requests[-1]
    assert via_grpc.request_id == "public-fields"
    # float32 on the wire (proto floats) against float64 JSON: compare the sampling values loosely.
    grpc_fields, http_fields = _without_id(via_grpc), _without_id(via_http)
    grpc_sampling, http_sampling = grpc_fields.pop("sampling_params"), http_fields.pop("sampling_params")
    assert grpc_fields == http_fields
    assert grpc_sampling.keys() == http_sampling.keys()
    for key, value in http_sampling.items():
        if isinstance(value, float):
            assert abs(grpc_sampling[key] - value) < 1e-6, key
        elif key == "logit_bias":
            assert {int(k): v for k, v in grpc_sampling[key].items()} == {int(k): v for k, v in value.items()}
        else:
            assert grpc_sampling[key] == value, key
    assert via_grpc.kv_transfer_params == KV
    assert via_grpc.cache_salt == "salt" and via_grpc.priority == 3


async def test_unset_fields_take_the_defaults_of_the_completions_route(
    mock_served: tuple[PublicClient, httpx.AsyncClient, MockLlm],
) -> None:
    client, http, mock = mock_served
    # Generation-config defaults, as completions (the generate route takes vLLM's neutral defaults).
    r = await http.post("/v1/completions", json={"model": "tiny", "prompt": [1, 300, 301], "max_tokens": 20})
    assert r.status_code == 200, r.text
    via_http = mock.requests[-1]
    prompt = pb.TokenIds(ids=[1, 300, 301])
    await client.inference.Generate(
        pb.GenerateRequest(token_ids=prompt, stopping=pb.StoppingCriteria(max_new_tokens=20))
    )
    assert _without_id(mock.requests[-1]) == _without_id(via_http)
    assert mock.requests[-1].request_id  # an empty request_id became a random one
    response = await client.inference.Generate(pb.GenerateRequest(token_ids=prompt))
    assert mock.requests[-1].sampling_params.max_tokens == 512 - 3  # unset: the room left in the context
    assert response.outputs.HasField("finish_info")


def test_struct_round_trip_keeps_integers() -> None:
    assert struct_to_dict(dict_to_struct(KV)) == KV
    assert isinstance(struct_to_dict(dict_to_struct({"n": 3}))["n"], int)
