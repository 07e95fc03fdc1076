"""A server whose tokenizer cannot load stops at start-up; one over a token-only Llm refuses text with 501.

Before: a provided Llm naming no usable tokenizer started, reported ready, and answered every
completion (token ids included) with a 400 blaming the client.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.mock import tiny_mock
from tests.support.servers import start_server
from vllm_llm import MockLlm
from vllm_llm.wire import GenerateRequest, SamplingParams
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.server import Server
from vllm_server.source import LlmSource
from vllm_server.state import StartupError

MISSING = "/nonexistent/tokenizer-dir"


async def test_a_ready_llm_with_a_tokenizer_that_cannot_load_stops_the_start(tiny_model_dir: Path) -> None:
    mock = tiny_mock(tiny_model_dir, tokenizer=MISSING)
    server = Server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock))
    with pytest.raises(StartupError, match=f"the tokenizer '{MISSING}' cannot be loaded") as failed:
        await asyncio.wait_for(server.serve(asyncio.Event()), 60)
    assert "LlmInfo.tokenizer" in str(failed.value)
    assert server.http_port is None  # it never listened


async def test_a_tokenizer_that_cannot_load_stops_the_server_once_the_llm_is_ready(
    tiny_model_dir: Path,
) -> None:
    mock = tiny_mock(tiny_model_dir, tokenizer=MISSING)
    mock.pause()  # not ready when the server starts: the layers are attached once it is
    running = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock), ready=False)
    mock.resume()
    with pytest.raises(StartupError, match=MISSING):
        await asyncio.wait_for(running.task, 60)
    assert not running.state.subscribe_readiness().value


async def test_a_token_only_llm_serves_tokens_and_refuses_text_with_501() -> None:
    mock = MockLlm()  # its LlmInfo names no tokenizer
    running = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock))
    try:
        async with httpx.AsyncClient(base_url=running.base_url) as http:
            for path, body in (
                ("/v1/completions", {"model": "mock", "prompt": [5, 6, 7], "max_tokens": 2}),
                ("/v1/chat/completions", {"model": "mock", "messages": [{"role": "user", "content": "hi"}]}),
            ):
                response = await http.post(path, json=body)
                assert response.status_code == 501, response.text
                error = response.json()["error"]
                assert error["type"] == "NotImplementedError"
                assert "this server has no tokenizer" in error["message"]
        remote = await RemoteLlm.connect(running.grpc_target)
        try:
            request = GenerateRequest(
                request_id="t", prompt_token_ids=[5, 6, 7], sampling_params=SamplingParams(max_tokens=3)
            )
            outputs = [out async for out in await remote.generate(request)]
            assert sum(len(out.token_ids) for out in outputs) == 3
        finally:
            await remote.shutdown()
    finally:
        await running.stop()
        await mock.shutdown()


def test_the_cli_names_a_tokenizer_that_cannot_load() -> None:
    argv = [sys.executable, "-m", "vllm_server.cli", "serve", "--mock", "--tokenizer", MISSING, "--port", "0"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert f"Error: the tokenizer '{MISSING}' cannot be loaded" in done.stderr, done.stderr
