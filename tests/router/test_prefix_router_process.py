"""`vllm-frontend serve --remote ipv4:w1,w2 --routing prefix` as a process over two `--mock` worker
processes: requests that share a prompt prefix land on one worker, and different prefixes spread.

gRPC's ring_hash reads its request-hash header only with `GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY`
set; the router sets it for itself (`vllm_remote_llm._routing.enable_request_hash_header`). It starts
here with an environment without the variable, so what the test sees is what the product does alone.
Which worker served a request is read from outside, on each worker's `/metrics`
(`vllm:request_success_total`).
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import httpx
import pytest

from vllm_frontend_testing.processes import Frontend, mock_worker, until

RING_HASH_ENV = "GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY"
#: Prefixes sent; all of them landing on one of two workers by chance is about 2 * 0.5**16.
PREFIXES = 16
#: Requests per prefix, each with a suffix of its own.
ROUNDS = 3
#: The hashed part of a prompt: the router's default 4 blocks of 16 tokens (a `--mock` worker reports no
#: block size, so the router assumes vLLM's 16).
PREFIX_TOKENS = 64
#: A router over `--mock` workers listens within seconds; without the request-hash header gRPC's ring_hash
#: picks no worker for its first Info call and it never does.
STARTS_WITHIN = 120.0


async def _served(http: httpx.AsyncClient, worker: Frontend) -> float:
    """Requests `worker` finished (all finish reasons)."""
    text = (await http.get(f"{worker.base_url}/metrics")).text
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", text, re.M))


def _environment_names(pid: int) -> set[str] | None:
    """The names in the environment process `pid` started with (Linux), else None."""
    environ = Path(f"/proc/{pid}/environ")
    if not environ.exists():
        return None
    return {entry.split(b"=", 1)[0].decode() for entry in environ.read_bytes().split(b"\0") if entry}


def _prompt(prefix: int, suffix: int) -> list[int]:
    return [100 + prefix] * PREFIX_TOKENS + [600 + suffix, 700 + suffix]


async def test_a_prefix_router_process_keeps_each_prefix_on_one_worker(tiny_model_dir: Path) -> None:
    env = {name: value for name, value in os.environ.items() if name != RING_HASH_ENV}
    workers = list(await asyncio.gather(mock_worker(), mock_worker()))
    router: Frontend | None = None
    try:
        target = "ipv4:" + ",".join(w.grpc_target for w in workers)
        try:
            router = await Frontend.start(
                "--remote", target, "--routing", "prefix", "--grpc-port", "0",
                "--tokenizer", str(tiny_model_dir), "--served-model-name", "tiny",
                env=env, within=STARTS_WITHIN,
            )  # fmt: skip
        except TimeoutError:
            pytest.fail(f"the --routing prefix router did not listen within {STARTS_WITHIN} s")
        assert router.env is not None and RING_HASH_ENV not in router.env
        started_with = _environment_names(router.pid)
        assert started_with is None or RING_HASH_ENV not in started_with
        await router.wait_serving()
        landed: dict[int, int] = {}
        async with httpx.AsyncClient(timeout=60) as http:
            for prefix in range(PREFIXES):
                before = [await _served(http, w) for w in workers]
                for suffix in range(ROUNDS):
                    body = {"model": "tiny", "prompt": _prompt(prefix, suffix), "max_tokens": 1}
                    response = await http.post(f"{router.base_url}/v1/completions", json=body)
                    assert response.status_code == 200, response.text

                async def counted(before: list[float] = before) -> bool:
                    now = [await _served(http, w) for w in workers]
                    return sum(now) - sum(before) >= ROUNDS

                # a worker counts a request once its stream has ended there, which may be just after the
                # router answered: wait for the counts to show all of them
                await until(counted, within=10, what=f"the {ROUNDS} requests of prefix {prefix} counted")
                grown = [await _served(http, w) - b for w, b in zip(workers, before, strict=True)]
                assert sorted(grown) == [0, ROUNDS], f"prefix {prefix} landed on both workers: {grown}"
                landed[prefix] = grown.index(ROUNDS)
        print("worker per prefix:", landed)
        assert set(landed.values()) == {0, 1}, "every prefix landed on one worker: nothing spread"
    finally:
        await asyncio.gather(*(front.stop(10) for front in ([router] if router else []) + workers))
