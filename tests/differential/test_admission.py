"""vLLM's frontend admission control (`--max-num-queued-reqs`, `--max-num-queued-tokens`) against vLLM's own
server given the same flag: our worker and vLLM's server, each as a process, refuse the same requests with
the same 503 body on every generate route (a stream included: the refusal comes before the response
starts), count them alike in `vllm:admission_rejections_total`, and serve again once the queue drained.

A request is held in flight deterministically: its first chunk arrives, then the engine-core processes of
both servers are stopped (SIGSTOP), so nothing finishes until they are continued. The limits are enforced
in the frontend process, which keeps running: the refusals are the frontend's alone. For the token
backlog the engine is stopped first, so the held request never leaves its prefill.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.support.vllm_server import vllm_server, worker_process

ENGINE = ("--dtype", "float32", "--max-model-len", "512", "--enforce-eager")
PROMPT = "Admission control holds the queue"
HI = [{"role": "user", "content": "Hi"}]

#: Each generate route and a small request it takes, whole and streamed.
SMALL: dict[str, Any] = {"model": "tiny", "max_tokens": 4}
ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("completions", "/v1/completions", {**SMALL, "prompt": PROMPT}),
    ("chat", "/v1/chat/completions", {**SMALL, "messages": HI}),
    ("responses", "/v1/responses", {"model": "tiny", "input": "Hi", "max_output_tokens": 4}),
    ("messages", "/v1/messages", {**SMALL, "messages": HI}),
]
ROUTES += [(f"{case}-stream", path, {**body, "stream": True}) for case, path, body in ROUTES]
N2 = {"model": "tiny", "prompt": PROMPT, "max_tokens": 4, "n": 2}
#: Seconds a refusal may take (the frontend answers it at once; the bound only turns a hang into a failure).
REFUSAL_WITHIN = 30.0
LONG = {"model": "tiny", "prompt": PROMPT, "max_tokens": 400, "ignore_eos": True, "stream": True}


@asynccontextmanager
async def _servers(model: Path, logs: Path, *flags: str) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    """Our worker, then vLLM's server (one engine starting at once), both with `flags`; a client of each."""
    async with AsyncExitStack() as stack:
        ours = await stack.enter_async_context(
            worker_process("--model", str(model), *ENGINE, "--served-model-name", "tiny", *flags)
        )
        theirs = await stack.enter_async_context(vllm_server(model, *ENGINE, *flags, log_dir=logs))
        clients = {}
        for name, server in (("theirs", theirs), ("ours", ours)):
            http = httpx.AsyncClient(base_url=server.base_url, timeout=300)
            await stack.enter_async_context(http)
            http.headers["x-server-pid"] = str(server.pid)
            clients[name] = http
        yield clients


def _engine_processes(http: httpx.AsyncClient) -> list[psutil.Process]:
    """The engine-core processes under a server (vLLM names them `VLLM::EngineCore`)."""
    server = psutil.Process(int(http.headers["x-server-pid"]))
    found = [p for p in server.children(recursive=True) if "EngineCor" in p.name()]
    assert found, f"no engine-core process under {server.pid}"
    return found


@contextmanager
def _engines_stopped(clients: Mapping[str, httpx.AsyncClient]) -> Iterator[None]:
    """Every server's engine core stopped (SIGSTOP) for the block, then continued."""
    stopped = [p for http in clients.values() for p in _engine_processes(http)]
    for p in stopped:
        p.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        for p in stopped:
            p.send_signal(signal.SIGCONT)


class _Held:
    """A streamed completion read in a task: `started` once its response began (headers), `first` once its
    first data frame came; `done` is its frames."""

    def __init__(self, http: httpx.AsyncClient, body: dict[str, Any]) -> None:
        self.started = asyncio.Event()
        self.first = asyncio.Event()
        self.status = 0
        self.frames: list[str] = []
        self.task = asyncio.create_task(self._read(http, body))

    async def _read(self, http: httpx.AsyncClient, body: dict[str, Any]) -> list[str]:
        async with http.stream("POST", "/v1/completions", json=body) as response:
            self.status = response.status_code
            self.started.set()
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    self.frames.append(line)
                    self.first.set()
        return self.frames

    async def done(self) -> list[str]:
        return await asyncio.wait_for(self.task, 300)


async def _refused(http: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    """Status and JSON body of a request expected to be refused (a stream's too: nothing was streamed)."""
    try:
        # A refusal is the frontend's alone; a request let through waits on the stopped engine.
        response = await http.post(path, json=body, timeout=REFUSAL_WITHIN)
    except httpx.TimeoutException:
        pytest.fail(f"{path} on {http.base_url} was not refused within {REFUSAL_WITHIN} s")
    return response.status_code, response.json()


async def _rejections(http: httpx.AsyncClient) -> tuple[list[str], dict[str, float]]:
    """The `vllm:admission_rejections` lines of /metrics (HELP, TYPE, samples), and the count per reason."""
    text = (await http.get("/metrics")).text
    lines = [ln for ln in text.splitlines() if "vllm:admission_rejections" in ln and "_created" not in ln]
    counts = {}
    for ln in lines:
        if ln.startswith("vllm:admission_rejections_total{"):
            labels, value = ln.rsplit(" ", 1)
            counts[labels.split('reason="')[1].split('"')[0]] = float(value)
    return lines, counts


def _503(case: str, message: str) -> tuple[int, dict[str, Any]]:
    """vLLM's refusal: its ErrorResponse of a GracefulHTTPError, in Anthropic's shape on /v1/messages."""
    if case.startswith("messages"):
        return 503, {"type": "error", "error": {"type": "Service Unavailable", "message": message}}
    return 503, {"error": {"message": message, "type": "Service Unavailable", "param": None, "code": 503}}


RETRY = "Please try again later or on a different instance."
#: vLLM's QueueOverflowError and MaxQueuedTokensError.
QUEUE_FULL = f"The engine is currently busy and cannot accept new requests. {RETRY}"
BACKLOG_FULL = f"The engine has reached its prefill token backlog limit. {RETRY}"


async def _served(http: httpx.AsyncClient, body: dict[str, Any]) -> None:
    response = await http.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text


async def test_max_num_queued_reqs(tiny_model_dir: Path, tmp_path: Path) -> None:
    """One request in flight against a limit of one: every generate route answers vLLM's 503, an n=2
    request too; the counter says so; once it ended a request is served, and n=2 still refused alone."""
    async with _servers(tiny_model_dir, tmp_path, "--max-num-queued-reqs", "1") as clients:
        for http in clients.values():
            lines, counts = await _rejections(http)
            assert counts == {"max_num_queued_reqs": 0.0, "max_num_queued_tokens": 0.0}, lines
        assert (await _rejections(clients["ours"]))[0] == (await _rejections(clients["theirs"]))[0]

        held = {name: _Held(http, LONG) for name, http in clients.items()}
        for h in held.values():
            await asyncio.wait_for(h.first.wait(), 300)
        answers: dict[str, dict[str, tuple[int, Any]]] = {}
        with _engines_stopped(clients):
            for name, http in clients.items():
                answers[name] = {case: await _refused(http, path, body) for case, path, body in ROUTES}
                answers[name]["n2"] = await _refused(http, "/v1/completions", N2)
            metrics = {name: await _rejections(http) for name, http in clients.items()}
        assert answers["ours"] == answers["theirs"]
        for case, answer in answers["theirs"].items():
            assert answer == _503(case, QUEUE_FULL), case
        refusals = len(ROUTES) + 1
        assert metrics["ours"] == metrics["theirs"]
        assert metrics["theirs"][1] == {"max_num_queued_reqs": refusals, "max_num_queued_tokens": 0.0}

        for name, h in held.items():
            frames = await h.done()
            assert frames[-1] == "data: [DONE]", name
        for http in clients.values():
            await _served(http, {"model": "tiny", "prompt": PROMPT, "max_tokens": 4})
            # Nothing in flight, yet n=2 is two sequences against a limit of one (vLLM's check_admission(n)).
            assert await _refused(http, "/v1/completions", N2) == _503("n2", QUEUE_FULL)
            assert (await _rejections(http))[1]["max_num_queued_reqs"] == refusals + 1


async def test_max_num_queued_tokens(tiny_model_dir: Path, tmp_path: Path) -> None:
    """A request held in its prefill makes the backlog reach the limit: the next is refused with vLLM's
    503 and counted; once the held one ran, the backlog is empty and a request is served."""
    async with _servers(tiny_model_dir, tmp_path, "--max-num-queued-tokens", "1") as clients:
        for http in clients.values():
            assert (await _rejections(http))[1] == {"max_num_queued_reqs": 0.0, "max_num_queued_tokens": 0.0}
        held: dict[str, _Held] = {}
        answers = {}
        with _engines_stopped(clients):
            for name, http in clients.items():
                held[name] = h = _Held(http, {**LONG, "max_tokens": 4})
                await asyncio.wait_for(h.started.wait(), 300)
                assert h.status == 200
                answers[name] = {case: await _refused(http, path, body) for case, path, body in ROUTES}
            metrics = {name: await _rejections(http) for name, http in clients.items()}
        assert answers["ours"] == answers["theirs"]
        for case, answer in answers["theirs"].items():
            assert answer == _503(case, BACKLOG_FULL), case
        assert metrics["ours"] == metrics["theirs"]
        assert metrics["theirs"][1] == {"max_num_queued_reqs": 0.0, "max_num_queued_tokens": len(ROUTES)}
        for name, h in held.items():
            frames = await h.done()
            assert frames[-1] == "data: [DONE]", (name, frames)
            await _served(clients[name], {"model": "tiny", "prompt": PROMPT, "max_tokens": 4})
