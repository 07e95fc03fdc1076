"""A worker over a real vLLM engine (`vllm-frontend serve --model`, the tiny model), as its users see it:
started with vLLM's tool and reasoning parser flags it answers as vLLM's server with the same flags; a
worker killed outright takes its engine core with it; a client that goes away (from the worker, or from a
router in front of it) aborts its request in the engine; SIGTERM drains a loaded worker, which then exits
0 with its engine processes gone.

Two worker processes and vLLM's server, started together, probed while their engines start: vLLM's server
ends with the comparison (the module's second test), one worker is SIGKILLed next (which frees CPU for the
rest), the other (with the parser flags) serves the comparison and the disconnect tests and is drained by
the module's last test.
"""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest
import pytest_asyncio

from tests.differential.compare import assert_same
from tests.reliability.sse import Streamed, completion, stream_completion
from tests.support.grpc_serving import NOT_SERVING, SERVING, health_request, raw_client
from tests.support.grpc_serving import request as grpc_request
from tests.support.metrics import sample
from tests.support.timing import MARGIN, PATIENCE
from tests.support.vllm_server import START_DEADLINE, STOP_GRACE, vllm_argv
from vllm_frontend_testing.processes import (
    Frontend,
    ServerProcess,
    free_port,
    process_name,
    start_server,
    until,
)
from vllm_llm.wire import SERVICE_NAME

#: The worker's flags as the tests use them (`--enforce-eager` explicit: vLLM's default is off).
ARGS = (
    *("--served-model-name", "tiny", "--dtype", "float32", "--max-model-len", "512"),
    *("--grpc-port", "0", "--enforce-eager"),
)
#: vLLM's parser flags, on the drained worker and on vLLM's server beside it.
PARSERS = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3")
#: Tokens a request may run to: the model's 512 less a prompt of at most 32 tokens.
LONG = 480
#: What vLLM's engine core takes to end once SIGTERMed: its workers get VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS
#: (5) to leave, then 4 s after a SIGTERM of their own.
ENGINE_TEARDOWN = 9.0
#: The worker's drain bound (`--shutdown-grace-period`, its default).
GRACE = 30.0
#: The worker's engine flags as vLLM's server takes them.
ARGS_VLLM = ("--dtype", "float32", "--max-model-len", "512", "--enforce-eager")
ENGINE_PROCESSES = {"VLLM::EngineCor", "VLLM::Worker"}  # their `comm`, 15 characters at most


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def oracle(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Oracle]:
    """vLLM's server with the drained worker's flags, starting (as a task) beside the workers."""
    port = free_port()
    argv = vllm_argv(tiny_model_dir, port, *ARGS_VLLM, *PARSERS)
    log = tmp_path_factory.mktemp("vllm_server") / "server.log"
    starting = asyncio.create_task(
        start_server(
            "vLLM's server", argv, http_port=port, ready_path="/health", log_path=log, within=START_DEADLINE
        )
    )
    running = Oracle(starting, port)
    try:
        yield running
    finally:
        await running.stop()


@dataclass
class Oracle:
    """vLLM's server once `starting` is done, until `stop()`."""

    starting: asyncio.Task[ServerProcess]
    port: int

    async def stop(self) -> None:
        if not self.starting.done():
            self.starting.cancel()
        outcome = (await asyncio.gather(self.starting, return_exceptions=True))[0]
        if isinstance(outcome, ServerProcess):
            await outcome.stop(STOP_GRACE)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def workers(tiny_model_dir: Path, oracle: Oracle) -> AsyncIterator[tuple[Frontend, Frontend]]:
    """Two workers over the tiny model, started together (beside vLLM's server): (drained, killed); the
    drained one with vLLM's parser flags."""
    flags = [(*ARGS, *PARSERS), ARGS]
    started = await asyncio.gather(
        *(Frontend.start("--model", str(tiny_model_dir), *f) for f in flags), return_exceptions=True
    )
    fronts = [f for f in started if isinstance(f, Frontend)]
    try:
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome
        await _probe_while_starting(fronts, oracle)
        await asyncio.gather(*(f.wait_serving(START_DEADLINE) for f in fronts))
        yield fronts[0], fronts[1]
    finally:
        await asyncio.gather(*(f.stop(GRACE) for f in fronts))


#: What the probes answered just after the workers listened, their engines (and vLLM's server) starting.
AT_START: dict[str, object] = {}


async def _probe_while_starting(fronts: list[Frontend], oracle: Oracle) -> None:
    async with httpx.AsyncClient(timeout=PATIENCE) as http:
        for name, front in zip(("drained", "killed"), fronts, strict=True):
            AT_START[name] = [(await http.get(f"{front.base_url}{path}")).status_code for path in PROBES]
        try:
            AT_START["vllm"] = (await http.get(f"http://127.0.0.1:{oracle.port}/health")).status_code
        except httpx.ConnectError:
            AT_START["vllm"] = "refused"
        AT_START["vllm started"] = oracle.starting.done()


PROBES = ("/health", "/ready")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def router(workers: tuple[Frontend, Frontend]) -> AsyncIterator[Frontend]:
    """A router process (`--remote`) in front of the drained worker, for the disconnect tests."""
    worker, _ = workers
    front = await Frontend.start("--remote", worker.grpc_target, "--grpc-port", "0")
    try:
        await front.wait_serving(START_DEADLINE)
        yield front
    finally:
        await front.stop(GRACE)


# ---- probes while the engine starts -------------------------------------------------------------------


async def test_health_fails_while_the_engine_starts_as_on_vllms_server(
    workers: tuple[Frontend, Frontend],
) -> None:
    """vLLM's server does not listen before its engine started, so `/health` fails there (vllm-router and
    Kubernetes probes poll it); ours listens at once and answers 503 on both probes until its engine
    started, then 200. The module's first test: every server is up."""
    assert AT_START["vllm started"] is False, "vLLM's server was up before the workers listened"
    assert AT_START["vllm"] == "refused", AT_START
    assert AT_START["drained"] == AT_START["killed"] == [503, 503], AT_START
    async with httpx.AsyncClient(timeout=PATIENCE) as http:
        for front in workers:
            assert [(await http.get(f"{front.base_url}{path}")).status_code for path in PROBES] == [200, 200]


# ---- vLLM's tool and reasoning parser flags: the worker answers as vLLM's server --------------------

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASKED: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Paris?"}]
#: An answer begun with its reasoning done (`</think>` in the prompt): the engine applies a grammar
#: from there on (vLLM's structured outputs wait for the reasoning parser's end of reasoning).
THOUGHT = [*ASKED, {"role": "assistant", "content": "<think>\nIt rains there.\n</think>\n\n"}]
CONTINUED = {"continue_final_message": True, "add_generation_prompt": False}
#: A hermes tool call, forced token by token (a random-weight model writes nothing of the kind itself).
HERMES_CALL = r'<tool_call>\n\{"name": "get_weather", "arguments": \{"city": "(Paris|Lima)"\}\}\n</tool_call>'
PARSED: dict[str, dict[str, Any]] = {
    # qwen3's parser: an answer that never ends its reasoning is reasoning through and through
    "reasoning": {"messages": ASKED, "tools": [WEATHER], "tool_choice": "auto", "max_tokens": 24},
    # the grammar in the engine under the reasoning parser (what `structured_outputs_config` configures)
    "required": {"messages": ASKED, "tools": [WEATHER], "tool_choice": "required", "max_tokens": 24},
    # qwen3's parser starts in its reasoning unless the request turns thinking off (a `</think>` in the
    # prompt does not end it): then the answer is content
    "content": {
        "messages": THOUGHT,
        **CONTINUED,
        "chat_template_kwargs": {"enable_thinking": False},
        "max_tokens": 12,
        "min_tokens": 12,
    },
    "tool call": {
        "messages": THOUGHT,
        **CONTINUED,
        "tools": [WEATHER],
        "tool_choice": "auto",
        "max_tokens": 48,
        "structured_outputs": {"regex": HERMES_CALL},
    },
}


#: The field of the answer each case is for.
FOUND = {"reasoning": "reasoning", "required": "reasoning", "content": "content", "tool call": "tool_calls"}


async def test_with_vllms_parser_flags_the_worker_answers_as_vllms_server(
    workers: tuple[Frontend, Frontend], oracle: Oracle
) -> None:
    """The module's first test: it ends vLLM's server. Each case whole and streamed, field by field."""
    worker, _ = workers
    try:
        theirs_server = await oracle.starting
        async with (
            httpx.AsyncClient(base_url=theirs_server.base_url, timeout=PATIENCE) as theirs,
            httpx.AsyncClient(base_url=worker.base_url, timeout=PATIENCE) as ours,
        ):
            missed = {}
            for case, body in PARSED.items():
                request = {"model": "tiny", "temperature": 0, **body}
                expected = await _chat(theirs, request)
                got = await _chat(ours, request)
                assert_same(expected, got, path=case)
                expected_stream = await _chat_streamed(theirs, request)
                assert_same(expected_stream, await _chat_streamed(ours, request), path=f"{case} streamed")
                # what the case is for: vLLM's parsers found what it names, and ours the same
                message = expected["choices"][0]["message"]
                if not message.get(FOUND[case]):
                    missed[case] = message
            assert not missed, missed
    finally:
        await oracle.stop()


async def _chat(http: httpx.AsyncClient, request: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(CHAT, json=request)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def _chat_streamed(http: httpx.AsyncClient, request: dict[str, Any]) -> dict[str, Any]:
    """A streamed answer put together: its reasoning, content, tool calls and finish reason."""
    out: dict[str, Any] = {"reasoning": "", "content": "", "calls": {}, "finish_reason": None}
    async with http.stream("POST", CHAT, json={**request, "stream": True}) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:])["choices"]:
                delta = choice["delta"]
                out["reasoning"] += delta.get("reasoning") or ""
                out["content"] += delta.get("content") or ""
                for call in delta.get("tool_calls") or []:
                    entry = out["calls"].setdefault(str(call["index"]), {"name": "", "arguments": ""})
                    entry["name"] += (call.get("function") or {}).get("name") or ""
                    entry["arguments"] += (call.get("function") or {}).get("arguments") or ""
                out["finish_reason"] = choice.get("finish_reason") or out["finish_reason"]
    return out


# ---- SIGKILL: the engine core goes with its frontend ------------------------------------------------


async def test_a_worker_killed_outright_takes_its_engine_core_with_it(
    workers: tuple[Frontend, Frontend],
) -> None:
    """SIGKILL of the worker process alone (the OOM killer's way), a request running: the engine core and
    its worker process (the rest of the worker's process group) end within the engine's teardown time."""
    _, doomed = workers
    async with httpx.AsyncClient(base_url=doomed.base_url, timeout=PATIENCE) as http:
        running = Streamed()
        task = asyncio.create_task(stream_completion(http, completion(0, LONG), running))
        await asyncio.wait_for(running.first.wait(), PATIENCE)
        started = doomed.processes_left()
        assert {process_name(pid) for pid in started} >= ENGINE_PROCESSES, _named(started)
        doomed.signal(signal.SIGKILL)

        async def all_gone() -> bool:
            return not doomed.processes_left()

        try:
            await until(all_gone, within=ENGINE_TEARDOWN + MARGIN, what="the engine processes ending")
        except AssertionError:
            left = _named(doomed.processes_left())
            raise AssertionError(
                f"SIGKILLed, the worker left {left}; its log ends:\n{doomed.log_tail()}"
            ) from None
        with pytest.raises(httpx.TransportError):  # the stream was cut with its server
            await asyncio.wait_for(task, PATIENCE)


def _named(pids: list[int]) -> str:
    return ", ".join(f"{pid} {process_name(pid)}" for pid in pids) or "nothing"


# ---- a client that goes away: its request is aborted in the engine ----------------------------------


@dataclass
class Tokens:
    """A streamed request's tokens so far (continuous usage stats), and how it finished."""

    count: int = 0
    finish_reasons: list[str] = field(default_factory=list)
    done: bool = False
    first: asyncio.Event = field(default_factory=asyncio.Event)


async def stream_tokens(http: httpx.AsyncClient, path: str, body: dict[str, Any], into: Tokens) -> Tokens:
    """POST a streaming request (continuous usage) and read it to its end, counting its tokens."""
    stream_body = {
        **body,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    async with http.stream("POST", path, json=stream_body) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                into.done = True
            elif line.startswith("data: "):
                frame = json.loads(line[6:])
                if frame.get("usage"):
                    into.count = frame["usage"]["completion_tokens"]
                into.finish_reasons += [
                    c["finish_reason"] for c in frame["choices"] if c.get("finish_reason")
                ]
                into.first.set()
    return into


async def engine_load(http: httpx.AsyncClient) -> float:
    """Requests the engine core runs or queues, as it last reported them (`/metrics`)."""
    text = (await http.get("/metrics")).text
    return sample(text, "vllm:num_requests_running") + sample(text, "vllm:num_requests_waiting")


COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"


def _body(path: str, text: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "tiny", "max_tokens": LONG, "ignore_eos": True}
    if path == CHAT:
        return body | {"messages": [{"role": "user", "content": text}]}
    return body | {"prompt": text}


async def _leave_stream(http: httpx.AsyncClient, engine: httpx.AsyncClient, path: str) -> None:
    """Stream `path` over `http`, read three chunks, then close the connection (`engine`: the worker)."""
    async with http.stream("POST", path, json={**_body(path, "going away"), "stream": True}) as response:
        assert response.status_code == 200
        chunks = 0
        async for line in response.aiter_lines():
            chunks += line.startswith("data: ")
            if chunks == 3:
                assert await engine_load(engine) == 2  # the engine runs it, and the twin
                break  # leaving the block closes the connection, the rest unread


async def _leave_whole(http: httpx.AsyncClient, engine: httpx.AsyncClient, path: str) -> None:
    """Send a non-streamed request over `http` and go away once the engine (`engine`: the worker) runs it."""
    task = asyncio.create_task(http.post(path, json=_body(path, "going away")))

    async def both_running() -> bool:
        return await engine_load(engine) == 2

    await until(both_running, within=PATIENCE, what="the engine running the request")
    task.cancel()  # the client gives up: httpx closes the connection
    with pytest.raises(asyncio.CancelledError):
        await task


LEAVING = [
    pytest.param(CHAT, _leave_stream, id="chat-stream"),
    pytest.param(COMPLETIONS, _leave_stream, id="completions-stream"),
    pytest.param(CHAT, _leave_whole, id="chat-whole"),
    pytest.param(COMPLETIONS, _leave_whole, id="completions-whole"),
]


@pytest.mark.parametrize(("path", "leave"), LEAVING)
async def test_a_client_that_goes_away_aborts_its_request_in_the_engine(
    workers: tuple[Frontend, Frontend], path: str, leave: Any
) -> None:
    """The leaving client's request and a twin (same `max_tokens`, started first, read to its end) run in
    the same batches, one token each per step: had the engine not aborted the leaving one, it would have
    run as long as the twin. The engine's own count of requests falls to 1 while the twin has produced
    less than half its tokens, however fast or slow the machine."""
    worker, _ = workers
    await _goes_away(worker, worker, path, leave)


@pytest.mark.parametrize(("path", "leave"), LEAVING)
async def test_a_client_that_leaves_a_router_aborts_its_request_in_the_workers_engine(
    workers: tuple[Frontend, Frontend], router: Frontend, path: str, leave: Any
) -> None:
    """The same through a router process in front of the worker: the client leaves the router, and the
    worker's engine is read."""
    worker, _ = workers
    await _goes_away(worker, router, path, leave)


async def _goes_away(worker: Frontend, front: Frontend, path: str, leave: Any) -> None:
    """A twin and a leaving request sent to `front`; the engine of `worker` read."""
    async with (
        httpx.AsyncClient(base_url=worker.base_url, timeout=PATIENCE) as engine,
        httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE) as http,
    ):
        assert await engine_load(engine) == 0
        twin = Tokens()
        twin_task = asyncio.create_task(
            stream_tokens(http, COMPLETIONS, _body(COMPLETIONS, "the twin"), twin)
        )
        await asyncio.wait_for(twin.first.wait(), PATIENCE)
        await leave(http, engine, path)
        assert not twin_task.done(), "the twin ended before the other client left: nothing to compare"

        async def one_left() -> bool:
            return await engine_load(engine) <= 1

        await until(one_left, within=PATIENCE, what="the engine dropping the request")
        when = twin.count
        await asyncio.wait_for(twin_task, PATIENCE)
        assert twin.finish_reasons == ["length"] and twin.count == LONG and twin.done
        assert when < LONG // 2, f"the engine ran the request until its twin had {when} of {LONG} tokens"
        assert await engine_load(engine) == 0


# ---- SIGTERM under load: every stream whole, new requests refused, exit 0 ----------------------------

DRAINED = 16
DRAIN_TOKENS = 256


async def test_sigterm_drains_a_loaded_worker_then_it_exits_0(workers: tuple[Frontend, Frontend]) -> None:
    """The module's last test: it ends the worker."""
    worker, _ = workers
    async with (
        httpx.AsyncClient(base_url=worker.base_url, timeout=PATIENCE + GRACE) as http,
        raw_client(worker.grpc_target) as (stub, health),
    ):
        watch = health.Watch(health_request(SERVICE_NAME))
        assert (await watch.read()).status == SERVING
        streams = [Streamed() for _ in range(DRAINED)]
        tasks = [
            asyncio.create_task(stream_completion(http, completion(i, DRAIN_TOKENS), s))
            for i, s in enumerate(streams)
        ]
        await asyncio.wait_for(asyncio.gather(*(s.first.wait() for s in streams)), PATIENCE)
        group = worker.processes_left()  # what `exits_cleanly` finally finds gone includes the engine's
        assert {process_name(pid) for pid in group} >= ENGINE_PROCESSES, _named(group)

        worker.signal(signal.SIGTERM)  # the process alone, as a process manager does
        assert (await asyncio.wait_for(watch.read(), PATIENCE)).status == NOT_SERVING
        refused = await http.post(COMPLETIONS, json=completion(99, 4))
        assert refused.status_code == 503, refused.text[:300]
        with pytest.raises(grpc.aio.AioRpcError) as rpc:
            await stub.Generate(grpc_request("during-the-drain")).read()
        # the server's own refusal: gRPC's server is stopped only once the calls in flight ended
        assert rpc.value.code() == grpc.StatusCode.UNAVAILABLE, rpc.value
        assert "draining" in (rpc.value.details() or ""), rpc.value
        assert not any(t.done() for t in tasks), "the streams ended before the drain was tested"
        watch.cancel()

        ended = await asyncio.wait_for(asyncio.gather(*tasks), GRACE + PATIENCE)
    for s in ended:
        assert s.status == 200 and not s.errors, s.frames[-1:]
        assert s.finish_reasons == ["length"] and s.done
    # exit 0, and nothing of its process group left: the engine core and its worker process ended too
    await worker.exits_cleanly(within=GRACE + ENGINE_TEARDOWN + MARGIN)
