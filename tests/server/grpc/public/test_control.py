"""vllm.Control answers over the engine-core server and is absent over a provided Llm; health agrees."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import pytest_asyncio
from grpc_health.v1 import health_pb2

from tests.support.mock import tiny_mock
from tests.support.public_grpc import (
    NOT_SERVING,
    SERVICE_UNKNOWN,
    SERVING,
    PublicClient,
    choices,
    finish_name,
    public_client,
    read_rest,
)
from tests.support.servers import RunningServer, start_server
from vllm_llm import EngineCoreLlm, MockLlm
from vllm_server.config import ServerConfig
from vllm_server.grpc.proto import control_pb2
from vllm_server.grpc.proto import inference_pb2 as pb
from vllm_server.source import LlmSource


@pytest_asyncio.fixture(loop_scope="session")
async def mock_served(tiny_model_dir: Path) -> AsyncIterator[tuple[RunningServer, MockLlm]]:
    """A server over a provided MockLlm."""
    mock = tiny_mock(tiny_model_dir, step_interval=0.005)
    server = await start_server(ServerConfig(port=0, grpc_port=0), LlmSource.provided(mock))
    yield server, mock
    await server.stop()
    await mock.shutdown()


async def test_server_info(worker_client: PublicClient, engine_llm: EngineCoreLlm) -> None:
    import vllm

    info = await worker_client.control.GetServerInfo(control_pb2.GetServerInfoRequest())
    llm_info = engine_llm.info()
    assert info.api_version == "vllm"
    assert info.engine_version == vllm.__version__
    assert info.instance_id == engine_llm.vllm_config.instance_id
    assert info.max_model_len == llm_info.max_model_len == 512
    assert info.kv_block_size == llm_info.block_size and info.kv_block_size > 0
    assert info.total_kv_blocks == llm_info.num_kv_blocks and info.total_kv_blocks > 0
    assert info.max_running_requests == llm_info.max_num_seqs
    assert info.max_batched_tokens == llm_info.max_num_batched_tokens
    p = info.parallelism
    assert (p.tensor_parallel_size, p.pipeline_parallel_size, p.data_parallel_size) == (1, 1, 1)
    assert (p.data_parallel_rank, p.decode_context_parallel_size) == (0, 1)


async def test_model_info(worker_client: PublicClient, engine_llm: EngineCoreLlm) -> None:
    info = await worker_client.control.GetModelInfo(control_pb2.GetModelInfoRequest())
    assert info.model_id == engine_llm.info().model
    assert info.served_model_name == "tiny"
    assert list(info.served_model_aliases) == []
    assert info.supports_text_input and info.supports_token_ids_input
    assert not info.supports_multimodal
    assert (info.reasoning_parser, info.tool_call_parser) == ("", "")


async def test_kv_event_sources_are_empty_without_kv_events(worker_client: PublicClient) -> None:
    response = await worker_client.control.GetKvEventSources(control_pb2.GetKvEventSourcesRequest())
    assert list(response.sources) == []


async def test_abort_with_no_ids_or_unknown_ids_aborts_nothing(worker_client: PublicClient) -> None:
    request = pb.GenerateRequest(
        request_id="public-not-aborted",
        text="Once upon a time",
        temperature=0.0,
        stopping=pb.StoppingCriteria(max_new_tokens=400, ignore_eos=True),
    )
    call = worker_client.inference.GenerateStream(request, timeout=120)
    responses = [await call.read(), await call.read()]  # the prompt info, then the first output
    # Sent while the stream runs: neither may touch it (an empty list must not mean "everyone's").
    empty = await worker_client.control.Abort(control_pb2.AbortRequest())
    unknown = await worker_client.control.Abort(control_pb2.AbortRequest(request_ids=["never-started"]))
    assert empty == unknown == control_pb2.AbortResponse()
    responses += await read_rest(call)
    (seq,) = choices(responses).values()
    assert finish_name(seq.finish) == "length"
    assert seq.num_tokens == 400


async def test_abort_ends_a_stream_by_its_request_id(worker_client: PublicClient) -> None:
    request = pb.GenerateRequest(
        request_id="public-abort-me",
        text="Once upon a time",
        temperature=0.0,
        stopping=pb.StoppingCriteria(max_new_tokens=400, ignore_eos=True),
    )
    call = worker_client.inference.GenerateStream(request, timeout=120)
    responses = [await call.read(), await call.read()]  # the prompt info, then the first output
    await worker_client.control.Abort(control_pb2.AbortRequest(request_ids=["public-abort-me"]))
    responses += await read_rest(call)
    (seq,) = choices(responses).values()
    assert finish_name(seq.finish) == "abort"
    assert seq.num_tokens < 400


@pytest.mark.parametrize("service", ["vllm.Inference", "vllm.Control", ""])
async def test_health_covers_inference_and_control_over_the_engine(
    worker_client: PublicClient, service: str
) -> None:
    assert await worker_client.check(service) == SERVING
    assert await worker_client.first_watched(service) == SERVING


async def test_control_is_absent_over_a_provided_llm(router_client: PublicClient) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await router_client.control.GetServerInfo(control_pb2.GetServerInfoRequest())
    assert exc.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.aio.AioRpcError) as aborted:
        await router_client.control.Abort(control_pb2.AbortRequest(request_ids=["x"]))
    assert aborted.value.code() == grpc.StatusCode.UNIMPLEMENTED
    with pytest.raises(grpc.aio.AioRpcError) as checked:
        await router_client.check("vllm.Control")
    assert checked.value.code() == grpc.StatusCode.NOT_FOUND
    assert await router_client.first_watched("vllm.Control") == SERVICE_UNKNOWN
    assert await router_client.check("vllm.Inference") == SERVING


async def test_inference_health_follows_readiness(mock_served: tuple[RunningServer, MockLlm]) -> None:
    server, mock = mock_served
    async with public_client(server.grpc_target) as client:
        watch = client.health.Watch(health_pb2.HealthCheckRequest(service="vllm.Inference"))
        assert (await asyncio.wait_for(watch.read(), 5)).status == SERVING
        mock.pause()
        assert (await asyncio.wait_for(watch.read(), 5)).status == NOT_SERVING
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await client.check("vllm.Control")
        assert exc.value.code() == grpc.StatusCode.NOT_FOUND
        mock.resume()
        assert (await asyncio.wait_for(watch.read(), 5)).status == SERVING
        watch.cancel()
