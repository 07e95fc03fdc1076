"""Concurrent streams through RemoteLlm → worker gRPC → MockLlm, each checked token by token.

`python -m tests.reliability.load STREAMS TOKENS ROUNDS` runs a warm-up round and ROUNDS more in a fresh
process and prints what they left behind as JSON, so RSS is this load's alone (not a test session's,
whose engine core and fixtures allocate on their own schedule).
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass

from vllm_llm import GenerateStream, MockLlm
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest, SamplingParams
from vllm_remote_llm import RemoteLlm
from vllm_remote_llm._call import CallOutputs

TRACKED = (CallOutputs, GenerateStream, GenerateOutput, GenerateRequest)

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """This process's resident set size now (Linux /proc; `resource` only reports the peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


def settled_rss() -> int:
    """RSS after a full garbage collection."""
    gc.collect()
    return rss_bytes()


@dataclass(frozen=True)
class Round:
    """What one round of concurrent streams did."""

    streams: int
    tokens: int
    seconds: float


def prompt_of(i: int) -> list[int]:
    """A distinct prompt per stream, so a token delivered to the wrong stream shows."""
    return [3 + i % 97, 5 + i % 89, 7 + (i * 31) % 83, 11 + i // 97]


async def one_stream(remote: RemoteLlm, mock: MockLlm, tag: str, i: int, tokens: int) -> int:
    """Run one stream to its end; assert its tokens are exactly the mock's, in order, once each."""
    prompt = prompt_of(i)
    request = GenerateRequest(
        request_id=f"{tag}-{i}",
        prompt_token_ids=prompt,
        sampling_params=SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True),
    )
    got: list[int] = []
    finish = None
    async for out in await remote.generate(request):
        assert out.request_id == request.request_id
        assert finish is None, "an output after the final one"
        got.extend(out.token_ids)
        finish = out.finish_reason
    assert finish == FinishReason.LENGTH
    assert got == [mock.token_at(prompt, k) for k in range(tokens)], f"stream {i} lost or reordered tokens"
    return len(got)


async def run_round(remote: RemoteLlm, mock: MockLlm, tag: str, *, streams: int, tokens: int) -> Round:
    """`streams` concurrent streams of `tokens` tokens each; every one checked."""
    started = time.monotonic()
    counts = await asyncio.gather(*(one_stream(remote, mock, tag, i, tokens) for i in range(streams)))
    return Round(streams, sum(counts), time.monotonic() - started)


def live_objects() -> dict[str, int]:
    """Live instances of the per-request types, after a full collection."""
    gc.collect()
    return dict(Counter(type(o).__name__ for o in gc.get_objects() if isinstance(o, TRACKED)))


async def measure(streams: int, tokens: int, rounds: int) -> dict[str, object]:
    """A warm-up round, then `rounds` more; what they left behind."""
    from tests.support.grpc_serving import serving

    mock = MockLlm(step_interval=0.01)
    async with serving(mock) as served:
        remote = await RemoteLlm.connect(served.target, timeout=30, connect_timeout=10)
        try:
            await run_round(remote, mock, "warm", streams=streams, tokens=tokens)
            mock.requests.clear()  # the mock records every request by design; not the server's memory
            before, rss_before = live_objects(), settled_rss()
            total, seconds, rss = 0, [], []
            for n in range(rounds):
                done = await run_round(remote, mock, f"r{n}", streams=streams, tokens=tokens)
                total += done.tokens
                seconds.append(round(done.seconds, 2))
                mock.requests.clear()
                rss.append((settled_rss() - rss_before) >> 20)
            return {
                "tokens": total,
                "seconds": seconds,
                "running": mock.num_running,
                "calls": len(remote._calls),
                "live_before": before,
                "live_after": live_objects(),
                "rss_grown": settled_rss() - rss_before,
                "rss_grown_mib_per_round": rss,
            }
        finally:
            await remote.shutdown()
            await mock.shutdown()


if __name__ == "__main__":
    streams, tokens, rounds = (int(a) for a in sys.argv[1:4])
    print(json.dumps(asyncio.run(measure(streams, tokens, rounds))))
