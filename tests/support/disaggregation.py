"""A prefill worker and a decode worker, each an engine with vLLM's NixlConnector (UCX over host memory),
and a `--remote-prefill` router over them: three processes on loopback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from vllm_frontend_testing.processes import Frontend, free_port

#: Two engines starting at once on two cores (each then keeps about two threads busy once idle).
STARTUP_WITHIN = 600.0

#: Blocks held for a remote decode expire after `kv_lease_duration` (30 s by default); here a lease far
#: longer than any wait of the tests, so that only a release can free them in time.
KV_LEASE_SECONDS = 600
NIXL = json.dumps(
    {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_both",
        "kv_buffer_device": "cpu",
        "kv_connector_extra_config": {"kv_lease_duration": KV_LEASE_SECONDS},
    }
)


@dataclass
class PD:
    """The prefill worker, the decode worker and the router over both."""

    prefill: Frontend
    decode: Frontend
    router: Frontend


def _nixl_env() -> dict[str, str]:
    """A worker's environment: its own NIXL side channel (the decode worker pulls through it)."""
    return {
        **os.environ,
        "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1",
        "VLLM_NIXL_SIDE_CHANNEL_PORT": str(free_port()),
    }


async def _nixl_worker(model_dir: Path) -> Frontend:
    worker = await Frontend.start(
        "--model", str(model_dir), "--served-model-name", "tiny", "--grpc-port", "0", "--enforce-eager",
        "--kv-transfer-config", NIXL,
        env=_nixl_env(),
    )  # fmt: skip
    await worker.wait_serving(within=STARTUP_WITHIN)
    return worker


@contextlib.asynccontextmanager
async def open_pd(model_dir: Path) -> AsyncIterator[PD]:
    """Start both workers (at once: an idle NIXL worker keeps a core busy polling, so one started after
    the other starts slower still) and the router; stop all three at the end."""
    started = await asyncio.gather(_nixl_worker(model_dir), _nixl_worker(model_dir), return_exceptions=True)
    workers = [w for w in started if isinstance(w, Frontend)]
    try:
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome
        prefill, decode = workers
        router = await Frontend.start(
            "--remote", decode.grpc_target, "--remote-prefill", prefill.grpc_target, "--grpc-port", "-1"
        )
        workers.append(router)
        await router.wait_serving()
        yield PD(prefill, decode, router)
    finally:
        await asyncio.gather(*(w.stop(10) for w in reversed(workers)))


async def metric(front: Frontend, name: str, **labels: str) -> float:
    """The sum of a metric's samples on `front`'s `/metrics` whose labels include `labels`."""
    async with httpx.AsyncClient(base_url=front.base_url) as http:
        text = (await http.get("/metrics")).text
    found = 0.0
    for line_labels, value in re.findall(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", text, re.M):
        if all(f'{k}="{v}"' in line_labels for k, v in labels.items()):
            found += float(value)
    return found


async def transferred(front: Frontend) -> float:
    """Prompt tokens whose KV `front`'s engine received from a KV connector."""
    return await metric(front, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer")
