"""`--enable-prompt-tokens-details` and `--anthropic-disabled-thinking-effort`, against vLLM's own server
given the same flags: one worker process and one vLLM server, both started with both flags (and a chat
template that shows the reasoning effort a prompt renders with), and a router over the worker.

With the flag, usage carries `prompt_tokens_details`: a prompt sent twice is first computed and written to
the prefix cache (created_cache_tokens), then found there (cached_tokens). Each server sees each prompt
the same number of times, so their counts must be equal, key for key (vLLM's whole responses keep a null
count, its streamed usage chunks drop it). The router reports its worker's counts, carried over the wire
(PromptInfo.num_cache_creation_tokens).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.differential.compare import assert_same
from tests.support.servers import RunningServer, start_server
from tests.support.vllm_server import vllm_server, worker_process
from vllm_frontend_testing.processes import Frontend, ServerProcess
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

#: The reasoning effort shows as that many words before the conversation (none 1 ... max 6, unset 0): a
#: prompt's token count tells which effort it was rendered with.
TEMPLATE = (
    "{%- set efforts = {'none': 1, 'low': 2, 'medium': 3, 'high': 4, 'xhigh': 5, 'max': 6} -%}"
    "{%- set effort = reasoning_effort if reasoning_effort is defined and reasoning_effort else '' -%}"
    "{%- for _ in range(efforts.get(effort, 0)) %}effort {% endfor -%}"
    "{%- for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor -%}"
    "{%- if add_generation_prompt %}assistant:{% endif -%}"
)
FLAGS = ("--enable-prompt-tokens-details", "--anthropic-disabled-thinking-effort", "low")
ENGINE = ("--dtype", "float32", "--max-model-len", "512", "--enforce-eager")


@pytest.fixture(scope="module")
def template_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "effort.jinja"
    path.write_text(TEMPLATE)
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def details_worker(tiny_model_dir: Path, template_file: Path) -> AsyncIterator[Frontend]:
    """Our worker with both flags."""
    async with worker_process(
        "--model", str(tiny_model_dir), *ENGINE, "--served-model-name", "tiny", "--grpc-port", "0",
        "--chat-template", str(template_file), *FLAGS,
    ) as front:  # fmt: skip
        yield front


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def details_vllm(
    details_worker: Frontend,
    tiny_model_dir: Path,
    template_file: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ServerProcess]:
    """vLLM's server with the same flags, started once our worker is up (one engine starting at once)."""
    async with vllm_server(
        tiny_model_dir,
        *ENGINE, "--chat-template", str(template_file), *FLAGS,
        log_dir=tmp_path_factory.mktemp("details_vllm"),
    ) as server:  # fmt: skip
        yield server


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def details_router(details_worker: Frontend) -> AsyncIterator[RunningServer]:
    """A router over the worker (RemoteLlm), with both flags."""
    remote = await RemoteLlm.connect(details_worker.grpc_target)
    config = ServerConfig(
        port=0,
        grpc_port=None,
        chat_template=TEMPLATE,
        enable_prompt_tokens_details=True,
        anthropic_disabled_thinking_effort="low",
    )
    router = await start_server(config, LlmSource.provided(remote))
    try:
        yield router
    finally:
        await router.stop()
        await remote.shutdown()


def _long(tag: str) -> str:
    """A prompt no server has seen, long enough to fill whole KV blocks."""
    return f"{tag} {uuid.uuid4().hex}: " + "Tell me about the cache, twice over. " * 9


async def _post(base_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """A whole response's body, or for a stream its frames' payloads: {"events": [...]}."""
    async with httpx.AsyncClient(base_url=base_url, timeout=300) as http:
        if not body.get("stream"):
            response = await http.post(path, json=body)
            assert response.status_code == 200, response.text
            got: dict[str, Any] = response.json()
            return got
        events = []
        async with http.stream("POST", path, json=body) as response:
            assert response.status_code == 200, await response.aread()
            async for line in response.aiter_lines():
                if line.startswith("data: {"):
                    events.append(json.loads(line.removeprefix("data: ")))
        return {"events": events}


def _openai_usage(got: dict[str, Any]) -> dict[str, Any]:
    if "events" not in got:
        usage: dict[str, Any] = got["usage"]
        return usage
    last = got["events"][-1]
    assert last["choices"] == [], last
    usage = last["usage"]
    return usage


def _anthropic_usage(got: dict[str, Any]) -> Any:
    if "events" not in got:
        return got["usage"]
    # message_start's and message_delta's
    return [
        e.get("usage", e.get("message", {}).get("usage"))
        for e in got["events"]
        if "usage" in e or "message" in e
    ]


OPENAI = [
    ("/v1/chat/completions", False),
    ("/v1/chat/completions", True),
    ("/v1/completions", False),
    ("/v1/completions", True),
]


def _openai_body(path: str, stream: bool, prompt: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "tiny", "max_tokens": 2, "temperature": 0}
    if path == "/v1/completions":
        body["prompt"] = prompt
    else:
        body["messages"] = [{"role": "user", "content": prompt}]
    if stream:
        body |= {"stream": True, "stream_options": {"include_usage": True}}
    return body


def _assert_same_usage(theirs: list[dict[str, Any]], ours: list[dict[str, Any]]) -> None:
    """The details key for key (a null count kept or left out as vLLM's), the rest as any comparison."""
    assert [u.get("prompt_tokens_details") for u in ours] == [u.get("prompt_tokens_details") for u in theirs]
    assert_same(theirs, ours)


async def _twice(base_url: str, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    return [await _post(base_url, path, body) for _ in range(2)]


@pytest.mark.parametrize(("path", "stream"), OPENAI, ids=["chat", "chat-stream", "cmpl", "cmpl-stream"])
async def test_a_prompt_sent_twice_reports_its_cache_as_vllms(
    path: str, stream: bool, details_worker: Frontend, details_vllm: ServerProcess
) -> None:
    body = _openai_body(path, stream, _long(path))
    theirs = [_openai_usage(got) for got in await _twice(details_vllm.base_url, path, body)]
    ours = [_openai_usage(got) for got in await _twice(details_worker.base_url, path, body)]
    _assert_same_usage(theirs, ours)
    first, again = (u["prompt_tokens_details"] for u in theirs)
    assert first["cached_tokens"] == 0 and again["cached_tokens"] > 0
    if path == "/v1/chat/completions":  # only a chat reports what its prompt wrote to the cache
        assert first["created_cache_tokens"] == again["cached_tokens"] and again["created_cache_tokens"] == 0


@pytest.mark.parametrize(("path", "stream"), OPENAI, ids=["chat", "chat-stream", "cmpl", "cmpl-stream"])
async def test_a_router_reports_its_workers_counts(
    path: str, stream: bool, details_router: RunningServer, details_vllm: ServerProcess
) -> None:
    body = _openai_body(path, stream, _long(f"routed {path}"))
    theirs = [_openai_usage(got) for got in await _twice(details_vllm.base_url, path, body)]
    routed = [_openai_usage(got) for got in await _twice(details_router.base_url, path, body)]
    _assert_same_usage(theirs, routed)
    assert theirs[1]["prompt_tokens_details"]["cached_tokens"] > 0


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_a_response_reports_its_cache_writes_as_vllms(
    stream: bool, details_worker: Frontend, details_vllm: ServerProcess, details_router: RunningServer
) -> None:
    """/v1/responses reports cached and written tokens whatever the flag (vLLM's input_tokens_details)."""

    def usage(got: dict[str, Any]) -> Any:
        if "events" in got:
            (done,) = [e for e in got["events"] if e["type"] == "response.completed"]
            got = done["response"]
        return got["usage"]["input_tokens_details"]

    body = {"model": "tiny", "max_output_tokens": 2, "temperature": 0, "input": _long("responses")}
    body["stream"] = stream
    theirs = [usage(got) for got in await _twice(details_vllm.base_url, "/v1/responses", body)]
    ours = [usage(got) for got in await _twice(details_worker.base_url, "/v1/responses", body)]
    assert ours == theirs
    assert theirs[0]["cache_write_tokens"] == theirs[1]["cached_tokens"] > 0
    body["input"] = _long("responses routed")
    theirs = [usage(got) for got in await _twice(details_vllm.base_url, "/v1/responses", body)]
    routed = [usage(got) for got in await _twice(details_router.base_url, "/v1/responses", body)]
    assert routed == theirs


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
async def test_an_anthropic_message_reports_cache_reads_and_writes_as_vllms(
    stream: bool, details_worker: Frontend, details_vllm: ServerProcess, details_router: RunningServer
) -> None:
    def body(prompt: str) -> dict[str, Any]:
        messages = [{"role": "user", "content": prompt}]
        return {"model": "tiny", "max_tokens": 2, "temperature": 0, "messages": messages, "stream": stream}

    mine = body(_long("anthropic"))
    theirs = [_anthropic_usage(got) for got in await _twice(details_vllm.base_url, "/v1/messages", mine)]
    ours = [_anthropic_usage(got) for got in await _twice(details_worker.base_url, "/v1/messages", mine)]
    assert ours == theirs
    routed_body = body(_long("anthropic routed"))
    theirs = [
        _anthropic_usage(got) for got in await _twice(details_vllm.base_url, "/v1/messages", routed_body)
    ]
    routed = [
        _anthropic_usage(got) for got in await _twice(details_router.base_url, "/v1/messages", routed_body)
    ]
    assert routed == theirs
    again = theirs[1][-1] if stream else theirs[1]
    assert again["cache_read_input_tokens"] > 0


async def test_thinking_disabled_renders_with_the_configured_effort(
    details_worker: Frontend, details_vllm: ServerProcess, details_router: RunningServer
) -> None:
    def body(**fields: Any) -> dict[str, Any]:
        return {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], **fields}

    disabled = body(thinking={"type": "disabled"})
    low = body(output_config={"effort": "low"})
    counts = {}
    for name, base_url in (
        ("theirs", details_vllm.base_url),
        ("ours", details_worker.base_url),
        ("router", details_router.base_url),
    ):
        got = [
            (await _post(base_url, "/v1/messages/count_tokens", b))["input_tokens"]
            for b in (disabled, low, body())
        ]
        counts[name] = got
    assert counts["ours"] == counts["router"] == counts["theirs"]
    as_disabled, as_low, plain = counts["theirs"]
    assert as_disabled == as_low != plain  # "low", not auto's "none" (which this template renders)
    # and a message: the same prompt as vLLM's
    message = body(thinking={"type": "disabled"}, max_tokens=1, temperature=0)
    theirs = (await _post(details_vllm.base_url, "/v1/messages", message))["usage"]
    ours = (await _post(details_worker.base_url, "/v1/messages", message))["usage"]
    assert (
        sum(ours[k] for k in ours if "input" in k) == sum(theirs[k] for k in theirs if "input" in k) == as_low
    )
