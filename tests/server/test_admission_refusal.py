"""A queue limit's refusal (`AdmissionRefused`) through a router: the worker ends the call UNAVAILABLE and
names the limit (trailing metadata on Generate, `MuxError.refusal` on GenerateMux), the router's RemoteLlm
raises the same refusal, and the router answers vLLM's 503 body, a stream before it starts too.

(The refusal itself, by a real engine's limits beside vLLM's server, is tests/differential/test_admission.py.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.support.mock import tiny_info
from tests.support.servers import RunningServer, start_server
from vllm_llm import AdmissionReason, AdmissionRefused, MockLlm
from vllm_llm.wire import GenerateRequest
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

MESSAGES = {
    "max_num_queued_reqs": "The engine is currently busy and cannot accept new requests. "
    "Please try again later or on a different instance.",
    "max_num_queued_tokens": "The engine has reached its prefill token backlog limit. "
    "Please try again later or on a different instance.",
}
HI = [{"role": "user", "content": "Hi"}]


class RefusingLlm(MockLlm):
    """A MockLlm whose queue limit `reason` refuses every request while it is set."""

    reason: AdmissionReason | None = None
    refused = 0

    async def generate(self, request: GenerateRequest) -> Any:
        if self.reason is not None:
            self.refused += 1
            raise AdmissionRefused(self.reason)
        return await super().generate(request)


@pytest_asyncio.fixture(params=[False, True], ids=["calls", "mux"])
async def router(
    tiny_model_dir: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[httpx.AsyncClient, RefusingLlm]]:
    """A router (RemoteLlm over Generate calls or GenerateMux) over a worker over a RefusingLlm."""
    llm = RefusingLlm(info=tiny_info(tiny_model_dir), step_interval=0.001)
    worker = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(llm))
    remote = await RemoteLlm.connect(worker.grpc_target, mux=bool(request.param))
    front: RunningServer = await start_server(
        ServerConfig(port=0, grpc_port=None), LlmSource.provided(remote)
    )
    async with httpx.AsyncClient(base_url=front.base_url, timeout=30) as http:
        yield http, llm
    await front.stop()
    await remote.shutdown()
    await worker.stop()
    await llm.shutdown()


@pytest.mark.parametrize("reason", ["max_num_queued_reqs", "max_num_queued_tokens"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", {"model": "tiny", "prompt": "Hi", "max_tokens": 2}),
        ("/v1/chat/completions", {"model": "tiny", "messages": HI, "max_tokens": 2}),
    ],
    ids=["completions", "chat"],
)
async def test_a_worker_refusal_is_vllms_503_at_the_router(
    router: tuple[httpx.AsyncClient, RefusingLlm],
    reason: AdmissionReason,
    stream: bool,
    path: str,
    body: dict[str, Any],
) -> None:
    http, llm = router
    llm.reason = reason
    response = await http.post(path, json={**body, "stream": stream})
    assert response.status_code == 503, response.text
    assert response.json() == {
        "error": {"message": MESSAGES[reason], "type": "Service Unavailable", "param": None, "code": 503}
    }
    assert llm.refused >= 1
    llm.reason = None
    served = await http.post(path, json=body)
    assert served.status_code == 200, served.text


async def test_the_anthropic_route_reports_it_in_anthropics_shape(
    router: tuple[httpx.AsyncClient, RefusingLlm],
) -> None:
    """As vLLM's server: its ErrorResponse translated, type and message kept."""
    http, llm = router
    llm.reason = "max_num_queued_tokens"
    response = await http.post("/v1/messages", json={"model": "tiny", "messages": HI, "max_tokens": 2})
    assert response.status_code == 503, response.text
    assert response.json() == {
        "type": "error",
        "error": {"type": "Service Unavailable", "message": MESSAGES["max_num_queued_tokens"]},
    }
