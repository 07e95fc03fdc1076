"""The ORCA load report (`endpoint-load-metrics`) of our worker against vLLM's own server, and a router's
own (`vllm_server.http.load_report`).

Both engines are idle once a whole response is built, so the figures of the two servers agree as well as
the routes, the format and the metrics named.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.differential.conftest import Pair
from tests.support.servers import RunningServer, start_server
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.http.load_report import FORMAT_HEADER, REPORT_HEADER
from vllm_server.source import LlmSource

HI: list[Any] = [{"role": "user", "content": "Hi"}]
CHAT = {"model": "tiny", "messages": HI, "max_tokens": 4, "temperature": 0}
COMPLETION = {"model": "tiny", "prompt": "The quick brown fox", "max_tokens": 4, "temperature": 0}

#: (id, path, body): the routes whose whole answers carry the report.
ROUTES: list[tuple[str, str, dict[str, Any]]] = [
    ("chat", "/v1/chat/completions", CHAT),
    ("completion", "/v1/completions", COMPLETION),
    ("invocations-chat", "/invocations", CHAT),
    ("invocations-completion", "/invocations", COMPLETION),
]
#: (id, path, body): answers that carry none, asked in a format the report has.
WITHOUT: list[tuple[str, str, dict[str, Any]]] = [
    ("chat-stream", "/v1/chat/completions", {**CHAT, "stream": True}),
    ("completion-stream", "/v1/completions", {**COMPLETION, "stream": True}),
    ("chat-refused", "/v1/chat/completions", {**CHAT, "max_tokens": 100_000}),
    ("completion-refused", "/v1/completions", {**COMPLETION, "model": "nope"}),
    ("tokenize", "/tokenize", {"model": "tiny", "prompt": "Hi"}),
    ("responses", "/v1/responses", {"model": "tiny", "input": "Hi", "max_output_tokens": 4}),
]


async def post_both(
    pair: Pair, path: str, body: dict[str, Any], metrics_format: str | None
) -> list[httpx.Response]:
    """The same POST to vLLM's server and ours, asking for a report in `metrics_format` (None: none)."""
    headers = {} if metrics_format is None else {FORMAT_HEADER: metrics_format}
    return [await http.post(path, json=body, headers=headers) for http in (pair.theirs_http, pair.ours_http)]


@pytest.mark.parametrize("metrics_format", ["TEXT", "JSON", "text", "Json"])
@pytest.mark.parametrize(("case", "path", "body"), ROUTES, ids=[c for c, _, _ in ROUTES])
async def test_report(case: str, path: str, body: dict[str, Any], metrics_format: str, pair: Pair) -> None:
    theirs, ours = await post_both(pair, path, body, metrics_format)
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    assert REPORT_HEADER in theirs.headers, theirs.headers
    assert ours.headers.get(REPORT_HEADER) == theirs.headers[REPORT_HEADER]


@pytest.mark.parametrize("metrics_format", [None, "", "XML", "TEXTS"])
async def test_no_report_unless_asked_in_a_known_format(metrics_format: str | None, pair: Pair) -> None:
    theirs, ours = await post_both(pair, "/v1/chat/completions", CHAT, metrics_format)
    assert theirs.status_code == ours.status_code == 200, (theirs.text, ours.text)
    assert REPORT_HEADER not in theirs.headers
    assert REPORT_HEADER not in ours.headers


@pytest.mark.parametrize(("case", "path", "body"), WITHOUT, ids=[c for c, _, _ in WITHOUT])
async def test_no_report_on_other_answers(case: str, path: str, body: dict[str, Any], pair: Pair) -> None:
    theirs, ours = await post_both(pair, path, body, "TEXT")
    assert ours.status_code == theirs.status_code, (theirs.text, ours.text)
    assert REPORT_HEADER not in theirs.headers
    assert REPORT_HEADER not in ours.headers


# ---- a router reports its own view ---------------------------------------------------------------------


@pytest_asyncio.fixture
async def router(worker: RunningServer) -> AsyncIterator[RunningServer]:
    """A router over the session worker (no engine of its own)."""
    remote = await RemoteLlm.connect(worker.grpc_target)
    running = await start_server(
        ServerConfig(port=0, grpc_port=None, served_model_name=("tiny",)), LlmSource.provided(remote)
    )
    yield running
    await running.stop()
    await remote.shutdown()


@pytest.mark.parametrize("metrics_format", ["TEXT", "JSON"])
async def test_a_router_reports_its_own_view(metrics_format: str, router: RunningServer, pair: Pair) -> None:
    async with httpx.AsyncClient(base_url=router.base_url, timeout=300) as http:
        routed = await http.post("/v1/chat/completions", json=CHAT, headers={FORMAT_HEADER: metrics_format})
    worker = await pair.ours_http.post(
        "/v1/chat/completions", json=CHAT, headers={FORMAT_HEADER: metrics_format}
    )
    assert routed.status_code == worker.status_code == 200, (routed.text, worker.text)
    assert "num_requests_waiting" in worker.headers[REPORT_HEADER]
    # Names no metric (HTTP strips the space that ends "TEXT ").
    assert (
        routed.headers.get(REPORT_HEADER)
        == {"TEXT": "TEXT", "JSON": 'JSON {"named_metrics": {}}'}[metrics_format]
    )
