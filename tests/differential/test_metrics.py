"""/metrics against vLLM's own server on the same tiny model: the same families, types, labels, buckets.

Both servers serve the same requests; every `vllm:` family vLLM's server exposes that a worker can know
is on ours with the same type, label names and bucket boundaries (`LEFT_OUT` lists the rest, each with
its reason), and the request counters and histograms moved on both as the requests say they should.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.differential.conftest import Pair
from tests.support.metrics import families, sample

#: vLLM families ours leaves out, and why.
LEFT_OUT = {
    "vllm:estimated_flops_per_gpu": "vLLM's per-GPU performance estimates (PerfMetricsProm, an analytic "
    "model of FLOPs and bytes per step) are not computed by our frontend",
    "vllm:estimated_read_bytes_per_gpu": "as vllm:estimated_flops_per_gpu",
    "vllm:estimated_write_bytes_per_gpu": "as vllm:estimated_flops_per_gpu",
    "vllm:tool_call_parser_invocations": "our chat layer's tool parsers report no per-request parse outcome "
    "yet (not part of the engine's PrometheusStatLogger)",
}

REQUESTS = 2
MAX_TOKENS = 5
PROMPT = "The metrics of a request"


def _families(text: str) -> dict[str, Any]:
    """vLLM families by name (the `_created` companions vLLM's registry writes as gauges dropped)."""
    return {n: f for n, f in families(text).items() if n.startswith("vllm:") and not n.endswith("_created")}


def _label_names(family: Any) -> set[str]:
    names: set[str] = set()
    for s in family.samples:
        names |= set(s.labels) - {"le"}
    return names


def _buckets(family: Any) -> list[float]:
    return sorted({float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")})


async def _serve(http: httpx.AsyncClient) -> tuple[str, str]:
    """/metrics before and after `REQUESTS` completions of `MAX_TOKENS` tokens each."""
    before = (await http.get("/metrics")).text
    for _ in range(REQUESTS):
        response = await http.post(
            "/v1/completions",
            json={
                "model": "tiny",
                "prompt": PROMPT,
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "ignore_eos": True,
            },
        )
        assert response.status_code == 200, response.text
    return before, (await http.get("/metrics")).text


async def test_every_vllm_family_is_ours_with_the_same_type_labels_and_buckets(pair: Pair) -> None:
    _, theirs_text = await _serve(pair.theirs_http)
    _, ours_text = await _serve(pair.ours_http)
    theirs, ours = _families(theirs_text), _families(ours_text)
    missing = sorted(set(theirs) - set(ours) - set(LEFT_OUT))
    assert not missing, f"vLLM families missing on ours: {missing}"
    for name, family in theirs.items():
        if name in LEFT_OUT:
            continue
        mine = ours[name]
        assert mine.type == family.type, (name, mine.type, family.type)
        assert _label_names(mine) == _label_names(family), (name, _label_names(mine), _label_names(family))
        if family.type == "histogram":
            assert _buckets(mine) == _buckets(family), name
        assert mine.documentation == family.documentation, name
    # The engine label as vLLM sets it on a single-engine server.
    assert {s.labels["engine"] for s in ours["vllm:request_success"].samples} == {"0"}
    # Nothing of ours under vLLM's prefix that vLLM does not have.
    assert not set(ours) - set(theirs), sorted(set(ours) - set(theirs))


async def test_the_request_metrics_move_as_vllms_do(pair: Pair) -> None:
    theirs_before, theirs_after = await _serve(pair.theirs_http)
    ours_before, ours_after = await _serve(pair.ours_http)

    def rose(before: str, after: str, name: str, **labels: str) -> float:
        return sample(after, name, **labels) - sample(before, name, **labels)

    for name, labels, expected in (
        ("vllm:request_success_total", {"finished_reason": "length"}, REQUESTS),
        ("vllm:generation_tokens_total", {}, REQUESTS * MAX_TOKENS),
        ("vllm:e2e_request_latency_seconds_count", {}, REQUESTS),
        ("vllm:time_to_first_token_seconds_count", {}, REQUESTS),
        ("vllm:request_queue_time_seconds_count", {}, REQUESTS),
        ("vllm:request_prefill_time_seconds_count", {}, REQUESTS),
        ("vllm:request_decode_time_seconds_count", {}, REQUESTS),
        ("vllm:request_inference_time_seconds_count", {}, REQUESTS),
        ("vllm:request_time_per_output_token_seconds_count", {}, REQUESTS),
        ("vllm:request_num_preemptions_count", {}, REQUESTS),
        ("vllm:request_params_n_count", {}, REQUESTS),
        ("vllm:request_params_n_sum", {}, REQUESTS),
        ("vllm:request_params_max_tokens_sum", {}, REQUESTS * MAX_TOKENS),
        ("vllm:request_generation_tokens_sum", {}, REQUESTS * MAX_TOKENS),
        ("vllm:request_max_num_generation_tokens_sum", {}, REQUESTS * MAX_TOKENS),
    ):
        assert rose(theirs_before, theirs_after, name, **labels) == expected, ("theirs", name)
        assert rose(ours_before, ours_after, name, **labels) == expected, ("ours", name)
    # Same tokenizer, same prompt: the same prompt token counts, split by source or not.
    for name in (
        "vllm:prompt_tokens_total",
        "vllm:request_prompt_tokens_sum",
        "vllm:prompt_tokens_by_source_total",
    ):
        assert rose(ours_before, ours_after, name) == rose(theirs_before, theirs_after, name), name
    # The engine steps were counted, and each request spent measured time in prefill and decode.
    assert rose(ours_before, ours_after, "vllm:iteration_tokens_total_count") >= MAX_TOKENS
    assert rose(ours_before, ours_after, "vllm:request_prefill_time_seconds_sum") > 0
    assert rose(ours_before, ours_after, "vllm:request_decode_time_seconds_sum") > 0
    assert rose(ours_before, ours_after, "vllm:request_inference_time_seconds_sum") >= rose(
        ours_before, ours_after, "vllm:request_decode_time_seconds_sum"
    )
