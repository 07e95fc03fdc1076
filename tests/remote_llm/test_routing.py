"""Routing over several workers with gRPC's own balancers: prefix affinity (ring_hash keyed by a hash of
the prompt's leading KV blocks) and outlier ejection of a worker whose calls keep failing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec
import pytest

from tests.support.grpc_serving import Served, request, serving
from vllm_llm import EngineDead, GenerateStream, LlmError, MockLlm, Remote
from vllm_llm.mock import default_info
from vllm_llm.wire import GenerateOutput, GenerateRequest, LlmInfo
from vllm_remote_llm import OutlierDetection, RemoteLlm, Routing
from vllm_remote_llm._routing import prefix_hash

BLOCK = 16
#: Odd, so that round robin over two workers sends each prefix to both.
PREFIXES = 7
#: Odd, so that round robin over two workers sends each prefix to both.


@contextlib.asynccontextmanager
async def workers(*llms: MockLlm) -> AsyncIterator[list[Served]]:
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(serving(llm)) for llm in llms]


def _target(served: Sequence[Served]) -> str:
    return "ipv4:" + ",".join(s.target for s in served)


def _prompt(prefix: int, suffix: int) -> list[int]:
    """Five full blocks shared by every prompt of `prefix`, then a suffix of its own."""
    return [100 + prefix] * (5 * BLOCK) + [200 + suffix, 300 + suffix]


async def _run(remote: RemoteLlm, req: GenerateRequest) -> None:
    async for _ in await remote.generate(req):
        pass


def _info() -> LlmInfo:
    return msgspec.structs.replace(default_info(), block_size=BLOCK)


def _mock() -> MockLlm:
    return MockLlm(info=_info(), step_interval=0.0)


async def test_prefix_routing_keeps_each_prefix_on_one_worker_and_round_robin_does_not() -> None:
    a, b = _mock(), _mock()
    async with workers(a, b) as served:
        routings: tuple[Routing, ...] = ("prefix", "round_robin")
        for routing in routings:
            remote = await RemoteLlm.connect(_target(served), routing=routing)
            a.requests.clear()
            b.requests.clear()
            try:
                for suffix in range(6):
                    for prefix in range(PREFIXES):
                        await _run(
                            remote, request(f"{routing}-{prefix}-{suffix}", prompt=_prompt(prefix, suffix))
                        )
            finally:
                await remote.shutdown()
            where = {
                prefix: {
                    name
                    for name, mock in (("a", a), ("b", b))
                    for r in mock.requests
                    if r.prompt_token_ids[0] == 100 + prefix
                }
                for prefix in range(PREFIXES)
            }
            print(
                routing,
                {p: sorted(w) for p, w in where.items()},
                "per worker:",
                len(a.requests),
                len(b.requests),
            )
            if routing == "prefix":
                assert all(len(w) == 1 for w in where.values())  # every prefix on one worker
            else:
                assert all(w == {"a", "b"} for w in where.values())  # each prefix spread over both


def test_the_prefix_hash_covers_whole_blocks_and_the_salts() -> None:
    long = list(range(100))
    assert prefix_hash(long[:15], block_size=BLOCK, max_blocks=4) is None  # no full block: any worker
    assert prefix_hash(long[:16], block_size=BLOCK, max_blocks=4) == prefix_hash(
        long[:31], block_size=BLOCK, max_blocks=4
    )
    assert prefix_hash(long[:32], block_size=BLOCK, max_blocks=4) != prefix_hash(
        long[:16], block_size=BLOCK, max_blocks=4
    )
    assert prefix_hash(long, block_size=BLOCK, max_blocks=4) == prefix_hash(
        long[:64], block_size=BLOCK, max_blocks=4
    )
    salted = [
        prefix_hash(long, block_size=BLOCK, max_blocks=4, salt=s)
        for s in ((None, None), ("lora", None), (None, "salt"))
    ]
    assert len(set(salted)) == 3


class FailingLlm(MockLlm):
    """Serving (its health says so) but failing every request it is given."""

    attempts = 0

    async def generate(self, request: GenerateRequest) -> Any:
        self.attempts += 1
        raise LlmError("this worker fails everything")


async def test_a_failing_worker_is_failed_over_then_ejected() -> None:
    """Every request succeeds (a request the bad worker fails before taking it goes to the other), and
    outlier detection then stops picking the bad worker at all."""
    good, bad = _mock(), FailingLlm(info=_info())
    quick = OutlierDetection(interval=0.1, base_ejection_time=60.0, request_volume=4)
    async with workers(good, bad) as served:
        remote = await RemoteLlm.connect(_target(served), outlier_detection=quick)
        try:
            quiet = 0  # requests in a row that did not reach the bad worker
            for i in range(400):  # bounded: ejection follows the first interval with enough calls
                before = bad.attempts
                await _run(remote, request(f"r{i}"))  # never fails
                quiet = quiet + 1 if bad.attempts == before else 0
                if quiet >= 40:
                    break
            assert quiet >= 40, (
                f"the failing worker still gets requests after {i + 1} ({bad.attempts} attempts)"
            )
            assert bad.attempts >= 1  # it was picked before it was ejected
            assert len(good.requests) == i + 1
        finally:
            await remote.shutdown()


class FailsAfterTaking(MockLlm):
    """Takes every request (the router sees it accepted), then fails it before its first output, as a
    worker whose engine dies under it."""

    taken = 0

    async def generate(self, request: GenerateRequest) -> Any:
        self.taken += 1

        async def failing() -> AsyncIterator[GenerateOutput]:
            raise EngineDead("the engine died after taking the request")
            yield  # an async generator that fails on its first read

        async def nothing() -> None:
            return None

        return GenerateStream(request.request_id, failing(), nothing)


async def test_a_request_failed_after_acceptance_before_its_first_output_goes_to_another_worker() -> None:
    good, bad = _mock(), FailsAfterTaking(info=_info())
    async with workers(good, bad) as served:
        remote = await RemoteLlm.connect(_target(served))
        try:
            for i in range(8):  # round robin: half of them are taken by the bad worker first
                outs = [o async for o in await remote.generate(request(f"a{i}"))]
                assert outs[-1].finish_reason is not None and outs[0].token_ids
            assert bad.taken >= 1 and len(good.requests) == 8
            # a request whose every worker fails it still gets the error: at most FAILOVER_ATTEMPTS calls
            async with workers(FailsAfterTaking(info=_info())) as only:
                alone = await RemoteLlm.connect(_target(only))
                try:
                    with pytest.raises(Remote, match="engine died"):
                        await alone.generate(request("lost"))
                finally:
                    await alone.shutdown()
        finally:
            await remote.shutdown()
