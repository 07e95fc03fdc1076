"""Through the router hop nothing is lost: RemoteLlm → server (over a provided Llm, so no Control) → engine.

The same requests go to the EngineCoreLlm directly and through the hop; the engine must receive the same
EngineCoreRequest field by field, and the caller must see the same outputs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from tests.llm.test_engine_core import EVERY_FIELD, REQUEST_FIELDS, SAMPLING_FIELDS
from tests.support.delegating import DelegatingLlm
from tests.support.servers import RunningServer, start_server
from vllm_llm import EngineCoreLlm, Llm, TextLlm, TextRequest, TextSamplingParams
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


@pytest_asyncio.fixture(loop_scope="session")
async def hop(engine_llm: EngineCoreLlm) -> AsyncIterator[tuple[RunningServer, RemoteLlm]]:
    """A server over the session engine wrapped as an opaque Llm, and a RemoteLlm to it."""
    server = await start_server(
        ServerConfig(port=0, grpc_port=0), LlmSource.provided(DelegatingLlm(engine_llm))
    )
    remote = await RemoteLlm.connect(server.grpc_target)
    yield server, remote
    await remote.shutdown()
    await server.stop()


async def _sent_to_engine(engine: EngineCoreLlm, llm: Llm, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What `llm.generate(EVERY_FIELD)` makes the engine-core client send (recorded, not run)."""
    from vllm.v1.engine import EngineCoreRequest
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    sent: list[Any] = []

    async def record(request: Any) -> None:
        sent.append(request)

    with monkeypatch.context() as patch:
        patch.setattr(engine._client, "add_request_async", record)
        stream = await llm.generate(EVERY_FIELD)
        await stream.aclose()
    (ecr,) = sent
    return MsgpackDecoder(EngineCoreRequest).decode(MsgpackEncoder().encode(ecr))


async def test_the_engine_receives_the_same_request_through_the_hop(
    engine_llm: EngineCoreLlm, hop: tuple[RunningServer, RemoteLlm], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, remote = hop
    direct = await _sent_to_engine(engine_llm, engine_llm, monkeypatch)
    via_hop = await _sent_to_engine(engine_llm, remote, monkeypatch)
    for name, extract in REQUEST_FIELDS.items():
        assert extract(via_hop) == extract(direct) == getattr(EVERY_FIELD, name), name
    for name, extract in SAMPLING_FIELDS.items():
        assert extract(via_hop) == extract(direct), name


CASES = [
    TextSamplingParams(temperature=0.0, max_tokens=12, logprobs=3),
    TextSamplingParams(temperature=0.0, max_tokens=24, stop=[" a", "e"], include_stop_str_in_output=True),
    TextSamplingParams(temperature=0.0, max_tokens=24, stop=["th"], prompt_logprobs=2),
    TextSamplingParams(temperature=0.8, seed=7, max_tokens=10, n=2, logprobs=1),
    TextSamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True, min_tokens=4, stop_token_ids=[1093]),
]


@pytest.mark.parametrize("params", CASES, ids=[f"case{i}" for i in range(len(CASES))])
async def test_the_caller_sees_the_same_outputs_through_the_hop(
    engine_llm: EngineCoreLlm, hop: tuple[RunningServer, RemoteLlm], params: TextSamplingParams
) -> None:
    _, remote = hop
    request = TextRequest(request_id="rt", prompt="The cat sees a red apple", params=params)
    direct = await TextLlm(engine_llm).complete(request)
    via_hop = await TextLlm(remote).complete(msgspec.structs.replace(request, request_id="rt-hop"))
    assert msgspec.structs.replace(via_hop, request_id="rt") == direct
