"""Through the router hop nothing is lost: RemoteLlm → server (over a provided Llm, so no Control) → engine.

A request with every field set goes through the hop; the engine-core process must receive it field by
field as sent. The same requests go to the EngineCoreLlm directly and through the hop; the caller must see
the same outputs.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import msgspec
import pytest
import pytest_asyncio

from tests.llm.harness import collect
from tests.llm.test_engine_core import EVERY_FIELD, assert_arrived_intact, taken_before
from tests.support.delegating import DelegatingLlm
from tests.support.engine_recorder import REFUSE_PREFIX, EngineRecorder
from tests.support.servers import RunningServer, start_server
from vllm_llm import EngineCoreLlm, TextLlm, TextRequest, TextSamplingParams
from vllm_llm.wire import FinishReason, LlmInfo, LoraAdapter
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource


class _ServingEveryFieldsAdapter(DelegatingLlm):
    """The session engine, its Info listing the adapter EVERY_FIELD names: a server refuses a request for
    an adapter it does not serve (NOT_FOUND) before the engine. The engine core refuses the request
    itself (`REFUSE_PREFIX`), so the adapter is never loaded."""

    def info(self) -> LlmInfo:
        info = self.inner.info()
        lora = EVERY_FIELD.lora_request
        assert lora is not None
        served = LoraAdapter(name=lora.lora_name, lora_int_id=lora.lora_int_id, path=lora.lora_path)
        return msgspec.structs.replace(info, lora_adapters=[*(info.lora_adapters or ()), served])


@pytest_asyncio.fixture(loop_scope="session", params=[False, True], ids=["calls", "mux"])
async def hop(
    engine_llm: EngineCoreLlm, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[RunningServer, RemoteLlm]]:
    """A server over the session engine wrapped as an opaque Llm, and a RemoteLlm to it (a Generate call
    per request, or every request on one GenerateMux stream)."""
    server = await start_server(
        ServerConfig(port=0, grpc_port=0), LlmSource.provided(_ServingEveryFieldsAdapter(engine_llm))
    )
    remote = await RemoteLlm.connect(server.grpc_target, mux=request.param)
    yield server, remote
    await remote.shutdown()
    await server.stop()


async def test_the_engine_core_receives_every_field_through_the_hop(
    hop: tuple[RunningServer, RemoteLlm], engine_recorder: EngineRecorder
) -> None:
    # Recorded inside the engine-core process (tests.support.engine_recorder), then refused there.
    _, remote = hop
    request = msgspec.structs.replace(
        EVERY_FIELD, request_id=f"{REFUSE_PREFIX}every-field-via-hop-{uuid.uuid4().hex[:8]}"
    )
    got = await collect(await remote.generate(request))
    assert [o.finish_reason for o in got.outputs] == [FinishReason.ABORT]  # abort_immediately
    await taken_before(remote)
    assert_arrived_intact(engine_recorder.received_one(request.request_id), request)


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
