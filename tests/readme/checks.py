"""Checks on what the README's blocks start, beyond each block's own success, run on the same processes.

Each check runs before or after the one block that contains its marker (`tests/readme/test_readme.py`
fails when a marker matches no block, or several). Most hold assertions that once had processes of their
own, moved here so that the README's servers prove them:

- prefill/decode disaggregation (was tests/router/test_disaggregated.py): the router's output equals the
  decode worker's own and the prompt's KV came by transfer; blocks held for a decode that never runs are
  released before the connector's lease could free them; a killed prefill worker gives typed 503s;
- one trace and one request id through a router and its worker (was tests/router/test_tracing.py);
- prefix routing keeps each prefix on one worker and hits the prefix caches more than round robin (was
  tests/router/test_prefix_affinity.py, over a second in-process engine).
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Callable
from typing import Any

import httpx
import openai
import psutil
import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto
from opentelemetry.proto.trace.v1.trace_pb2 import Status as StatusProto

from tests.readme.runner import Check, Context, Hook
from tests.support.metrics import sample
from tests.support.otlp import Collector, ReceivedSpan
from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import until
from vllm_llm.wire import GenerateRequest, SamplingParams
from vllm_remote_llm import RemoteLlm

HOOKS: list[Hook] = []


def before(marker: str) -> Callable[[Check], Check]:
    """Run the check before the block that contains `marker`."""

    def register(check: Check) -> Check:
        HOOKS.append(Hook("before", marker, check))
        return check

    return register


def after(marker: str) -> Callable[[Check], Check]:
    """Run the check after the block that contains `marker`, on what it left running."""

    def register(check: Check) -> Check:
        HOOKS.append(Hook("after", marker, check))
        return check

    return register


def _json_lines(output: str) -> list[dict[str, Any]]:
    """The JSON objects a block printed at the start of a line (curl's answers, which end without a
    newline), among the servers' log lines."""
    decoder = json.JSONDecoder()
    found = []
    for line in output.splitlines():
        if line.startswith("{"):
            try:
                found.append(decoder.raw_decode(line)[0])
            except ValueError:
                continue
    return found


async def _metrics(port: int) -> str:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=PATIENCE) as http:
        response = await http.get("/metrics")
    response.raise_for_status()
    return response.text


def _client(port: int) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0)


# ---- Quick start ------------------------------------------------------------------------------------


@after("localhost:8000/v1/chat/completions")
async def the_quick_start_answers(ctx: Context) -> None:
    """The chat completion has a choice; the streamed completion ends with `[DONE]`."""
    chats = [o for o in _json_lines(ctx.output) if o.get("object") == "chat.completion"]
    assert len(chats) == 1 and chats[0]["choices"][0]["message"]["content"], ctx.output[-2000:]
    assert "data: [DONE]" in ctx.output


# ---- Serving: a router over two workers, LoRA -------------------------------------------------------


@after("--routing prefix")
async def the_router_serves_the_workers_adapter(ctx: Context) -> None:
    """The README's completion with the adapter went through; the router lists the model and the adapter
    it learned from its workers."""
    (completion,) = [o for o in _json_lines(ctx.output) if o.get("object") == "text_completion"]
    assert completion["model"] == "sql" and completion["choices"][0]["finish_reason"] == "length"
    async with _client(8001) as router:
        models = {m.id: m for m in (await router.models.list()).data}
    assert set(models) == {"tiny", "sql"}, models


#: make serve's worker and worker 2 (HTTP ports), their gRPC target, and the prefix router over them.
WORKERS = (8000, 8002)
WORKERS_TARGET = "ipv4:127.0.0.1:50051,127.0.0.1:50052"
PREFIX_ROUTER = 8001
#: Odd, so that round robin over two workers sends each prefix to both in turn.
PREFIXES = 5
ROUNDS = 4


async def _served() -> list[float]:
    """Requests each worker finished."""
    return [sample(await _metrics(port), "vllm:request_success_total") for port in WORKERS]


async def _prefix_cache() -> tuple[float, float]:
    """Prefix-cache queries and hits (tokens), summed over both workers."""
    texts = [await _metrics(port) for port in WORKERS]
    return (
        sum(sample(t, "vllm:prefix_cache_queries_total") for t in texts),
        sum(sample(t, "vllm:prefix_cache_hits_total") for t in texts),
    )


@after("--routing prefix")
async def prefix_routing_lands_each_prefix_on_one_worker_and_hits_the_cache_more(ctx: Context) -> None:
    """Through the README's `--routing prefix` router every request of a shared prefix lands on one worker;
    round robin over the same workers (a RemoteLlm here) sends each to both; the prefix caches hit more
    under prefix routing (both ratios printed)."""
    remote = await RemoteLlm.connect(WORKERS_TARGET, routing="round_robin")
    block = remote.info().block_size or 16
    ratios: dict[str, float] = {}
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{PREFIX_ROUTER}", timeout=PATIENCE) as http:
            for base, routing in ((1000, "prefix"), (600, "round_robin")):
                before = await _prefix_cache()
                landed: dict[int, set[int]] = {p: set() for p in range(PREFIXES)}
                for rnd in range(ROUNDS):
                    for p in range(PREFIXES):
                        prompt = [base + p] * (2 * block) + [base + 50 + rnd]
                        served = await _served()
                        if routing == "prefix":
                            body = {"model": "tiny", "prompt": prompt, "max_tokens": 1}
                            (await http.post("/v1/completions", json=body)).raise_for_status()
                        else:
                            request = GenerateRequest(
                                request_id=f"affinity-{p}-{rnd}",
                                prompt_token_ids=prompt,
                                sampling_params=SamplingParams(max_tokens=1),
                            )
                            async for _ in await remote.generate(request):
                                pass

                        async def counted(served: list[float] = served) -> bool:
                            return sum(await _served()) == sum(served) + 1

                        await until(counted, within=PATIENCE, what="a worker counting the request")
                        now = await _served()
                        landed[p] |= {i for i in range(len(WORKERS)) if now[i] > served[i]}
                print(routing, "workers per prefix:", {p: sorted(w) for p, w in landed.items()})
                if routing == "prefix":
                    assert all(len(w) == 1 for w in landed.values()), landed
                else:
                    assert all(w == {0, 1} for w in landed.values()), landed
                after_ = await _prefix_cache()
                queries, hits = after_[0] - before[0], after_[1] - before[1]
                ratios[routing] = hits / queries
                print(f"{routing}: prefix-cache hits {hits:.0f} of {queries:.0f} queried tokens")
    finally:
        await remote.shutdown()
    assert ratios["prefix"] > ratios["round_robin"], ratios


# ---- Serving: prefill/decode disaggregation ---------------------------------------------------------

#: The ports of the README's P/D example.
PD_ROUTER, PREFILL, DECODE = 8010, 8011, 8012
SHORT = "The cat sat on the mat"
LONG = " ".join(["a longer prompt about cats, dogs and the weather"] * 24)  # more than one 128-token block
GREEDY: dict[str, Any] = {"max_tokens": 12, "temperature": 0}


async def _transferred() -> float:
    """Prompt tokens whose KV the decode worker's engine received from its KV connector."""
    text = await _metrics(DECODE)
    return sample(text, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer")


@after("--remote-prefill")
async def the_router_output_equals_the_decode_worker_and_the_prompt_came_by_transfer(ctx: Context) -> None:
    """For prompts shorter and longer than a KV block, plain and streamed chat."""
    async with _client(PD_ROUTER) as router, _client(DECODE) as decode:
        for prompt in (SHORT, LONG):
            before = await _transferred()
            got = await router.completions.create(model="tiny", prompt=prompt, **GREEDY)
            after_ = await _transferred()
            prompt_tokens = got.usage.prompt_tokens if got.usage else 0
            assert after_ - before == prompt_tokens > 0, (prompt_tokens, before, after_)
            # the decode worker alone, its prefix cache salted away: it computes the prompt itself
            alone = await decode.completions.create(
                model="tiny", prompt=prompt, extra_body={"cache_salt": f"alone-{len(prompt)}"}, **GREEDY
            )
            assert got.choices[0].text == alone.choices[0].text
            assert got.choices[0].finish_reason == alone.choices[0].finish_reason == "length"

            messages: Any = [{"role": "user", "content": prompt}]
            streamed = await router.chat.completions.create(
                model="tiny", messages=messages, stream=True, **GREEDY
            )
            text = "".join([c.choices[0].delta.content or "" async for c in streamed if c.choices])
            plain = await decode.chat.completions.create(
                model="tiny", messages=messages, extra_body={"cache_salt": f"chat-{len(prompt)}"}, **GREEDY
            )
            assert text == plain.choices[0].message.content and text


@after("external_kv_transfer")
async def a_killed_prefill_worker_gives_typed_errors(ctx: Context) -> None:
    """Last of the P/D session: the prefill worker stays down (its restart: tests/soak)."""
    pid = ctx.session.listeners()[PREFILL]
    ctx.session.may_exit(pid)
    victim = psutil.Process(pid)
    for proc in [*victim.children(recursive=True), victim]:  # as SIGKILL of its process group would
        proc.send_signal(signal.SIGKILL)
    psutil.wait_procs([victim], timeout=PATIENCE)
    async with _client(PD_ROUTER) as router:
        with pytest.raises(openai.APIStatusError) as caught:
            await router.completions.create(model="tiny", prompt=SHORT, **GREEDY)
    assert caught.value.status_code == 503, caught.value
    body = caught.value.body
    assert isinstance(body, dict) and body.get("type") == "ServiceUnavailableError", body


# ---- Observability: tracing -------------------------------------------------------------------------

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACE_ROUTER, TRACE_WORKER = 8020, 8021
#: Where the README's servers export their spans.
OTLP_PORT = 4317
#: How long the spans may take to reach the collector (batch delay, export, a loaded machine).
SPANS_WITHIN = 60.0
_collector: Collector | None = None


@before("--otlp-traces-endpoint")
async def an_otlp_collector_listens(ctx: Context) -> None:
    """The collector the README's servers export to, for as long as they run."""
    global _collector
    _collector = Collector(OTLP_PORT)
    await _collector.start()
    ctx.resources.push_async_callback(_collector.stop)


def _in_trace(spans: list[ReceivedSpan], name: str, pid: int) -> list[ReceivedSpan]:
    return [s for s in spans if s.trace_id == TRACE_ID and s.name == name and s.pid == pid]


@after("--otlp-traces-endpoint")
async def one_chat_request_is_one_trace_from_the_router_to_the_worker(ctx: Context) -> None:
    """The client's `traceparent` is the root: the router's HTTP span is its child, the router's
    `llm_request` the HTTP span's, the worker's `llm_request` the router's (over vllm.internal.Llm)."""
    assert _collector is not None
    servers = ctx.session.listeners()
    router, worker = servers[TRACE_ROUTER], servers[TRACE_WORKER]
    (chat,) = [o for o in _json_lines(ctx.output) if o.get("object") == "chat.completion"]

    def complete(spans: list[ReceivedSpan]) -> bool:
        return (
            len(_in_trace(spans, "POST /v1/chat/completions", router)) == 1
            and len(_in_trace(spans, "llm_request", router)) == 1
            and len(_in_trace(spans, "llm_request", worker)) == 1
        )

    try:
        spans = await _collector.wait_for(complete, SPANS_WITHIN)
    except TimeoutError:
        got = sorted((s.name, s.pid, s.trace_id) for s in _collector.spans)
        raise AssertionError(f"the trace is incomplete; received {got}") from None
    (http,) = _in_trace(spans, "POST /v1/chat/completions", router)
    (at_router,) = _in_trace(spans, "llm_request", router)
    (at_worker,) = _in_trace(spans, "llm_request", worker)

    # Parent and child: client → router HTTP → router llm_request → worker llm_request.
    assert http.parent_span_id == CLIENT_SPAN
    assert at_router.parent_span_id == http.span_id
    assert at_worker.parent_span_id == at_router.span_id
    # The worker was reached over vllm.internal.Llm: no HTTP span of its own in this trace.
    assert [s.name for s in spans if s.trace_id == TRACE_ID and s.pid == worker] == ["llm_request"]
    assert {http.kind, at_router.kind, at_worker.kind} == {SpanProto.SPAN_KIND_SERVER}
    assert {http.status, at_router.status, at_worker.status} == {StatusProto.STATUS_CODE_UNSET}
    assert http.attributes["http.route"] == "/v1/chat/completions"
    assert http.attributes["http.response.status_code"] == 200
    assert {http.resource["service.name"], at_worker.resource["service.name"]} == {"vllm-frontend"}

    # vLLM's gen_ai attributes on the worker's span, the client's request id on both sides of the hop.
    attrs = at_worker.attributes
    assert attrs["gen_ai.request.id"] == at_router.attributes["gen_ai.request.id"] == "chatcmpl-r-1"
    assert attrs["gen_ai.usage.prompt_tokens"] == chat["usage"]["prompt_tokens"]
    assert attrs["gen_ai.usage.completion_tokens"] == chat["usage"]["completion_tokens"]
    assert (attrs["gen_ai.request.max_tokens"], attrs["gen_ai.request.temperature"]) == (6, 0.5)
    assert attrs["gen_ai.request.n"] == 1
    assert 0 < attrs["gen_ai.latency.time_to_first_token"] <= attrs["gen_ai.latency.e2e"]
    # The engine's phases, from the final output's timings (EngineCoreLlm fills them in).
    queue = attrs["gen_ai.latency.time_in_queue"]
    prefill = attrs["gen_ai.latency.time_in_model_prefill"]
    decode = attrs["gen_ai.latency.time_in_model_decode"]
    inference = attrs["gen_ai.latency.time_in_model_inference"]
    assert min(queue, prefill, decode) >= 0 and inference == pytest.approx(prefill + decode)
    assert inference <= attrs["gen_ai.latency.e2e"]


@after("--otlp-traces-endpoint")
async def the_access_and_request_logs_follow_one_request_id_through_both(ctx: Context) -> None:
    """uvicorn's access line at the router only (the worker was reached over gRPC); the request log at
    both, under the client's X-Request-Id, which the response echoes."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{TRACE_ROUTER}", timeout=PATIENCE) as http:
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        response = await http.post("/v1/chat/completions", json=body, headers={"X-Request-Id": "follow-me-7"})
    assert response.status_code == 200, response.text
    assert response.headers["x-request-id"] == "follow-me-7"
    received = re.compile(r"Received request chatcmpl-follow-me-7: params: SamplingParams\(.*max_tokens=2")
    access = re.compile(r'INFO: +127\.0\.0\.1:\d+ - "POST /v1/chat/completions HTTP/1\.1" 200')

    async def logged() -> bool:
        return len(received.findall(ctx.session.log_tail(lines=100_000))) == 2

    await until(logged, within=30, what="the request log line of the router and of the worker")
    # One access line per request, both the router's: the README's and this one.
    assert len(access.findall(ctx.session.log_tail(lines=100_000))) == 2
