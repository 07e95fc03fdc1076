"""`/load` and `--enable-server-load-tracking`, as on vLLM's server: with the flag, the inference requests in
progress; without it, always 0 (vLLM's `load_aware_call` counts only with the flag on; its `/load` then
reads the counter it never moved). An idle server against vLLM's: tests/differential/test_small_routes.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.support.mock import tiny_mock
from tests.support.servers import start_server
from tests.support.timing import PATIENCE
from vllm_server.cli import serve_config
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


@pytest_asyncio.fixture(loop_scope="session", params=[True, False], ids=["tracking", "not-tracking"])
async def served(tiny_model_dir: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[str, bool]]:
    """A server over a slow MockLlm (a token per 50 ms), with or without load tracking."""
    mock = tiny_mock(tiny_model_dir, step_interval=0.05)
    tracking: bool = request.param
    config = ServerConfig(port=0, grpc_port=-1, enable_server_load_tracking=tracking)
    server = await start_server(config, LlmSource.provided(mock))
    try:
        yield server.base_url, tracking
    finally:
        await server.stop()
        await mock.shutdown()


async def test_load_counts_a_request_in_progress_only_when_tracking(served: tuple[str, bool]) -> None:
    base_url, tracking = served
    async with httpx.AsyncClient(base_url=base_url, timeout=PATIENCE) as http:
        assert (await http.get("/load")).json() == {"server_load": 0}
        body = {"model": "tiny", "prompt": "The cat", "max_tokens": 200, "ignore_eos": True, "stream": True}
        async with http.stream("POST", "/v1/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    break  # the request runs: its first chunk is here
            during = (await http.get("/load")).json()
        assert during == {"server_load": 1 if tracking else 0}


@pytest.mark.parametrize(
    ("flags", "tracking"),
    [([], False), (["--enable-server-load-tracking"], True), (["--no-enable-server-load-tracking"], False)],
)
def test_the_flag_as_vllm_spells_it(flags: list[str], tracking: bool) -> None:
    assert serve_config(["--mock", *flags]).server.enable_server_load_tracking is tracking
