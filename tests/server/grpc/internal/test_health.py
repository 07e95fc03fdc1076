"""grpc.health.v1 follows the Llm's readiness: per served service, watched, NOT_SERVING for good on drain."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
import pytest

from tests.support.grpc_serving import (
    NOT_SERVING,
    SERVICE_UNKNOWN,
    SERVING,
    Served,
    health_request,
    raw_client,
    serving,
)
from tests.support.timing import MARGIN
from vllm_llm import MockLlm
from vllm_llm.wire import SERVICE_NAME

Stubs = tuple[Any, Any]

#: How long `GrpcFrontend.stop` lets open health Watches get the drain's NOT_SERVING (`min(grace, 1.0)`).
WATCH_END_BOUND = 1.0


async def next_status(watch: Any) -> Any:
    response = await asyncio.wait_for(watch.read(), 5)
    return response.status


async def check(health: Any, service: str) -> Any:
    return (await health.Check(health_request(service))).status


@pytest.mark.parametrize("service", ["", SERVICE_NAME])
async def test_not_serving_at_boot_until_ready(service: str) -> None:
    llm = MockLlm()
    llm.pause()  # an Llm that is not ready yet when the server starts
    async with serving(llm) as served, raw_client(served.target) as (_, health):
        watch = health.Watch(health_request(service))
        assert await next_status(watch) == NOT_SERVING
        assert await check(health, service) == NOT_SERVING
        llm.resume()
        assert await next_status(watch) == SERVING
        watch.cancel()
    await llm.shutdown()


async def test_readiness_drops_and_returns(mock: MockLlm, stubs: Stubs) -> None:
    _, health = stubs
    watch = health.Watch(health_request(SERVICE_NAME))
    assert await next_status(watch) == SERVING
    mock.pause()
    assert await next_status(watch) == NOT_SERVING
    assert await check(health, "") == NOT_SERVING
    mock.resume()
    assert await next_status(watch) == SERVING
    assert await check(health, "") == SERVING
    watch.cancel()


async def test_drain_is_not_serving_for_good(mock: MockLlm, served: Served, stubs: Stubs) -> None:
    _, health = stubs
    watch = health.Watch(health_request(SERVICE_NAME))
    assert await next_status(watch) == SERVING
    await served.frontend.begin_drain()
    assert await next_status(watch) == NOT_SERVING
    mock.pause()
    # No wait needed: the resume wakes the server's readiness follower at once, and it has set the
    # statuses (one step, nothing to wait for) before the loop even polls for the Checks sent below.
    mock.resume()
    assert await check(health, SERVICE_NAME) == NOT_SERVING
    assert await check(health, "") == NOT_SERVING
    watch.cancel()


async def test_only_served_services_have_a_status(mock: MockLlm) -> None:
    async with (
        serving(mock, health_services=["vllm.Inference"]) as served,
        raw_client(served.target) as (
            _,
            health,
        ),
    ):
        assert served.frontend.health_services == ("", SERVICE_NAME, "vllm.Inference")
        assert await check(health, "vllm.Inference") == SERVING
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await check(health, "vllm.Control")
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        watch = health.Watch(health_request("vllm.Control"))
        assert await next_status(watch) == SERVICE_UNKNOWN
        watch.cancel()


async def test_stop_does_not_wait_out_the_grace_for_health_watches(mock: MockLlm) -> None:
    async with serving(mock) as served, raw_client(served.target) as (_, health):
        watch = health.Watch(health_request(SERVICE_NAME))
        assert await next_status(watch) == SERVING
        started = time.monotonic()
        await served.frontend.stop(10)
        # Far below the 10 s grace: the watch was ended, the stop did not wait for it.
        assert time.monotonic() - started < WATCH_END_BOUND + MARGIN
        # The drain reached the watcher before its stream ended.
        statuses = []
        while (response := await watch.read()) is not grpc.aio.EOF:
            statuses.append(response.status)
        assert statuses == [NOT_SERVING]


async def test_extra_services_are_served_with_their_health(mock: MockLlm) -> None:
    def add_echo(server: grpc.aio.Server) -> None:
        async def echo(payload: bytes, context: Any) -> bytes:
            return payload

        handlers = {"Echo": grpc.unary_unary_rpc_method_handler(echo)}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("test.Echo", handlers),))

    async with (
        serving(mock, extra_services=[add_echo], health_services=["test.Echo"], api_key="k") as served,
        raw_client(served.target) as (_, health),
    ):
        channel = grpc.aio.insecure_channel(served.target)
        async with channel:
            echo = channel.unary_unary("/test.Echo/Echo")
            assert await echo(b"hi", metadata=(("x-api-key", "k"),)) == b"hi"
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await echo(b"hi")
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert await check(health, "test.Echo") == SERVING
        watch = health.Watch(health_request("test.Echo"))
        assert await next_status(watch) == SERVING
        mock.pause()
        assert await next_status(watch) == NOT_SERVING
        assert await check(health, "test.Echo") == NOT_SERVING
        watch.cancel()
