"""vllm.Inference over the session engine (directly and through a router): the HTTP routes' results.

The same prompt and parameters go to `/v1/completions` or `/inference/v1/generate` of the worker and to
Generate / GenerateStream of the worker and of a router in front of it; text, token ids and finish
reasons must be equal.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.public_grpc import PublicClient, choice, choices, finish_name
from tests.support.servers import RunningServer
from vllm_server.grpc.proto import inference_pb2 as pb

PROMPT = "The quick brown fox"
PROMPT_IDS = [1, 300, 301, 302, 303]


def greedy(max_new_tokens: int, **stopping: Any) -> dict[str, Any]:
    """GenerateRequest fields: temperature 0, token ids out."""
    return {
        "temperature": 0.0,
        "stopping": pb.StoppingCriteria(max_new_tokens=max_new_tokens, **stopping),
        "response": pb.ResponseOptions(output_token_ids=True, prompt_token_ids=True),
    }


async def completion(http: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    """The one choice of a /v1/completions call (with its token ids), plus usage."""
    r = await http.post("/v1/completions", json={"model": "tiny", "return_token_ids": True, **body})
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


async def test_generate_equals_completions(client: PublicClient, worker_http: httpx.AsyncClient) -> None:
    http = await completion(worker_http, prompt=PROMPT, temperature=0, max_tokens=12)
    response = await client.inference.Generate(pb.GenerateRequest(text=PROMPT, **greedy(12)))
    got = choice(response)
    (expected,) = http["choices"]
    assert got.text == expected["text"]
    assert got.token_ids == expected["token_ids"]
    assert finish_name(got.finish) == expected["finish_reason"]
    assert got.finish is not None and got.finish.num_output_tokens == http["usage"]["completion_tokens"]
    assert list(response.prompt_info.token_ids) == expected["prompt_token_ids"]
    assert response.prompt_info.num_prompt_tokens == http["usage"]["prompt_tokens"]


async def test_stream_equals_the_generate_route(client: PublicClient, worker_http: httpx.AsyncClient) -> None:
    r = await worker_http.post(
        "/inference/v1/generate",
        json={"token_ids": PROMPT_IDS, "sampling_params": {"temperature": 0, "max_tokens": 10}},
    )
    assert r.status_code == 200, r.text
    (expected,) = r.json()["choices"]
    request = pb.GenerateRequest(token_ids=pb.TokenIds(ids=PROMPT_IDS), **greedy(10))
    responses = await client.stream(request)
    assert responses[0].prompt_info.num_prompt_tokens == len(PROMPT_IDS)
    assert list(responses[0].prompt_info.token_ids) == PROMPT_IDS
    (streamed,) = choices(responses).values()
    assert streamed.token_ids == expected["token_ids"]
    assert finish_name(streamed.finish) == expected["finish_reason"]
    whole = choice(await client.inference.Generate(request))
    assert (whole.text, whole.token_ids) == (streamed.text, streamed.token_ids)
    assert streamed.num_tokens == len(streamed.token_ids)


@pytest.mark.parametrize("include", [False, True])
async def test_stop_strings(client: PublicClient, worker_http: httpx.AsyncClient, include: bool) -> None:
    full = choice(await client.inference.Generate(pb.GenerateRequest(text=PROMPT, **greedy(24))))
    stop = full.text[4:7]
    assert stop
    http = await completion(
        worker_http,
        prompt=PROMPT,
        temperature=0,
        max_tokens=24,
        stop=[stop],
        include_stop_str_in_output=include,
    )
    (expected,) = http["choices"]
    request = pb.GenerateRequest(text=PROMPT, **greedy(24, stop_strings=[stop], include_stop_strings=include))
    for got in (choice(await client.inference.Generate(request)), choices(await client.stream(request))[0]):
        assert (got.text, got.token_ids) == (expected["text"], expected["token_ids"])
        assert got.finish is not None and got.finish.finish_reason == pb.FinishInfo.STOP
        assert got.finish.WhichOneof("stop_reason") == "stop_string"
        assert got.finish.stop_string == expected["stop_reason"] == stop


async def test_stop_token_ids(client: PublicClient, worker_http: httpx.AsyncClient) -> None:
    full = choice(
        await client.inference.Generate(pb.GenerateRequest(text=PROMPT, **greedy(16, ignore_eos=True)))
    )
    stop_id = full.token_ids[6]
    http = await completion(
        worker_http,
        prompt=PROMPT,
        temperature=0,
        max_tokens=16,
        ignore_eos=True,
        min_tokens=4,
        stop_token_ids=[stop_id],
    )
    (expected,) = http["choices"]
    request = pb.GenerateRequest(
        text=PROMPT, **greedy(16, ignore_eos=True, min_new_tokens=4, stop_token_ids=[stop_id])
    )
    got = choice(await client.inference.Generate(request))
    assert (got.text, got.token_ids) == (expected["text"], expected["token_ids"])
    assert got.finish is not None and got.finish.stop_token_id == expected["stop_reason"] == stop_id
    assert finish_name(got.finish) == expected["finish_reason"] == "stop"


async def test_logprobs_equal_the_completions_logprobs(
    client: PublicClient, worker_http: httpx.AsyncClient
) -> None:
    http = await completion(
        worker_http, prompt=PROMPT, temperature=0, max_tokens=8, logprobs=3, prompt_logprobs=2
    )
    (expected,) = http["choices"]
    request = pb.GenerateRequest(
        text=PROMPT,
        temperature=0.0,
        stopping=pb.StoppingCriteria(max_new_tokens=8),
        response=pb.ResponseOptions(
            output_token_ids=True,
            output_logprobs=True,
            output_candidates=pb.CandidateTokens(top_n=3),
            prompt_logprobs=True,
            prompt_candidates=pb.CandidateTokens(top_n=2),
        ),
    )
    response = await client.inference.Generate(request)
    got = choice(response)
    assert got.token_ids == expected["token_ids"]
    assert got.logprobs == pytest.approx(expected["logprobs"]["token_logprobs"], abs=1e-4)
    assert got.ranks == [1] * len(got.token_ids)  # greedy: the chosen token is the most likely
    assert all(len(c) == 2 for c in got.candidates)  # top 3 less the chosen one
    prompt = response.prompt_info
    prompt_ids = expected["prompt_token_ids"]
    assert len(prompt.logprobs) == len(prompt_ids) and prompt.logprobs[0] == 0.0
    http_prompt = expected["prompt_logprobs"]
    for i in range(1, len(prompt_ids)):
        entry = http_prompt[i][str(prompt_ids[i])]
        assert prompt.logprobs[i] == pytest.approx(entry["logprob"], abs=1e-4)
        assert prompt.ranks[i] == entry["rank"]
    streamed = choices(await client.stream(request))[0]
    assert streamed.logprobs == pytest.approx(got.logprobs, abs=1e-4)


async def test_several_sequences_stream_by_index(
    client: PublicClient, worker_http: httpx.AsyncClient
) -> None:
    http = await completion(worker_http, prompt=PROMPT, temperature=0.8, seed=7, max_tokens=10, n=2)
    expected = {c["index"]: c for c in http["choices"]}
    request = pb.GenerateRequest(
        text=PROMPT,
        temperature=0.8,
        sampling=pb.RandomSampling(num_sequences=2, seed=7),
        stopping=pb.StoppingCriteria(max_new_tokens=10),
        response=pb.ResponseOptions(output_token_ids=True),
    )
    got = choices(await client.stream(request))
    assert sorted(got) == [0, 1]
    for index, seq in got.items():
        assert (seq.text, seq.token_ids) == (expected[index]["text"], expected[index]["token_ids"])
        assert finish_name(seq.finish) == expected[index]["finish_reason"]


async def test_output_options_shape_the_response(client: PublicClient) -> None:
    bare = pb.GenerateRequest(
        text=PROMPT,
        temperature=0.0,
        stopping=pb.StoppingCriteria(max_new_tokens=4),
        response=pb.ResponseOptions(output_text=False),
    )
    response = await client.inference.Generate(bare)
    out = response.outputs
    assert (out.text, list(out.token_ids), list(out.logprobs)) == ("", [], [])
    assert out.num_tokens == 4 and out.finish_info.num_output_tokens == 4
    assert response.prompt_info.num_prompt_tokens > 0 and not response.prompt_info.token_ids
    defaulted = await client.inference.Generate(
        pb.GenerateRequest(text=PROMPT, temperature=0.0, stopping=pb.StoppingCriteria(max_new_tokens=4))
    )
    assert defaulted.outputs.text  # output_text defaults to true


async def test_empty_request_id_and_model_default(client: PublicClient) -> None:
    for model in ("", "tiny"):
        request = pb.GenerateRequest(model=model, text=PROMPT, **greedy(3))
        assert choice(await client.inference.Generate(request)).num_tokens == 3


async def test_truncate_prompt_tokens_keeps_the_last_tokens(client: PublicClient) -> None:
    ids = [1, *range(300, 320)]
    whole = await client.inference.Generate(
        pb.GenerateRequest(token_ids=pb.TokenIds(ids=ids[-5:]), **greedy(6))
    )
    cut = await client.inference.Generate(
        pb.GenerateRequest(token_ids=pb.TokenIds(ids=ids), truncate_prompt_tokens=5, **greedy(6))
    )
    assert list(cut.prompt_info.token_ids) == ids[-5:]
    assert cut.outputs.token_ids == whole.outputs.token_ids


async def test_requests_are_counted_in_the_metrics(
    worker: RunningServer, worker_client: PublicClient
) -> None:
    registry = worker.state.metrics.registry
    labels = {"model_name": "tiny", "engine": "0", "finished_reason": "length"}

    def succeeded() -> float:
        return registry.get_sample_value("vllm:request_success_total", labels) or 0.0

    before = succeeded()
    await worker_client.inference.Generate(pb.GenerateRequest(text=PROMPT, **greedy(3)))
    await worker_client.stream(pb.GenerateRequest(text=PROMPT, **greedy(3)))
    assert succeeded() == before + 2


async def test_structured_output_choice(worker_client: PublicClient, worker_http: httpx.AsyncClient) -> None:
    options = ["yes", "no", "maybe"]
    http = await completion(
        worker_http, prompt=PROMPT, temperature=0, max_tokens=8, structured_outputs={"choice": options}
    )
    (expected,) = http["choices"]
    request = pb.GenerateRequest(
        text=PROMPT,
        decoding=pb.DecodingParameters(choice=pb.DecodingParameters.StringChoices(choices=options)),
        **greedy(8),
    )
    got = choice(await worker_client.inference.Generate(request))
    assert got.text in options
    assert (got.text, got.token_ids) == (expected["text"], expected["token_ids"])
