"""LoRA adapters loaded and unloaded at runtime on worker processes (a real engine each), used through router
processes (`vllm-frontend serve --remote`) at once, with nothing in between: no sleep, no model list.

- One worker behind a router: a request naming an adapter just loaded on the worker is served through
  the router (the router re-reads its worker's adapters on a miss, `vllm_server.fresh_read`), and one
  naming an adapter just unloaded is a 404, as on the worker (the worker refuses an adapter it no longer
  serves; its engine would otherwise load it again from the request's path).
- Two workers behind a router, the adapter loaded on one of them (the README asks for the same adapters
  on every worker): a request is served only by the worker that loaded it, and is a 404 when it lands on
  the other one; never run by a worker that did not load it.

The workers start once for the module, at once (about 80 s on an idle 2-core machine); the routers take
seconds.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from vllm_frontend_testing.processes import Frontend, until
from vllm_frontend_testing.tiny_model import build_tiny_lora

pytestmark = pytest.mark.asyncio(loop_scope="session")

GREEDY = {"prompt": "The cat", "max_tokens": 8, "temperature": 0, "ignore_eos": True}
#: A worker as `make serve` runs one, with runtime LoRA (two slots, the tiny adapters' rank).
WORKER_ARGS = (
    "--served-model-name", "tiny", "--grpc-port", "0", "--dtype", "float32", "--max-model-len", "512",
    "--enable-lora", "--enable-runtime-lora", "--max-lora-rank", "8", "--max-loras", "2",
)  # fmt: skip


@dataclass
class LoraCluster:
    """Two workers, a router over the first, and a router over both."""

    workers: tuple[Frontend, Frontend]
    over_one: Frontend
    over_both: Frontend
    #: Two adapters of the tiny model with different weights.
    adapters: tuple[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def cluster(tiny_model_dir: Path) -> AsyncIterator[LoraCluster]:
    adapters = (str(build_tiny_lora(tiny_model_dir, seed=3)), str(build_tiny_lora(tiny_model_dir, seed=4)))
    started: list[Frontend] = []
    try:
        for outcome in await asyncio.gather(
            *(Frontend.start("--model", str(tiny_model_dir), *WORKER_ARGS) for _ in range(2)),
            return_exceptions=True,
        ):
            if isinstance(outcome, BaseException):
                raise outcome
            started.append(outcome)
        await asyncio.gather(*(w.wait_serving() for w in started))
        first, second = started
        over_one = await Frontend.start("--remote", first.grpc_target, "--grpc-port", "-1")
        started.append(over_one)
        over_both = await Frontend.start(
            "--remote", f"ipv4:{first.grpc_target},{second.grpc_target}", "--grpc-port", "-1"
        )
        started.append(over_both)
        await asyncio.gather(over_one.wait_serving(), over_both.wait_serving())
        yield LoraCluster((first, second), over_one, over_both, adapters)
    finally:
        await asyncio.gather(*(front.stop(30) for front in reversed(started)))


async def _complete(http: httpx.AsyncClient, front: Frontend, model: str) -> httpx.Response:
    return await http.post(f"{front.base_url}/v1/completions", json={"model": model, **GREEDY})


def _text(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    text: str = body["choices"][0]["text"]
    return text


def _not_found(response: httpx.Response) -> bool:
    return response.status_code == 404 and response.json()["error"]["type"] == "NotFoundError"


async def _post_ok(http: httpx.AsyncClient, front: Frontend, path: str, body: dict[str, str]) -> None:
    response = await http.post(f"{front.base_url}{path}", json=body)
    assert response.status_code == 200, response.text


async def _cards(http: httpx.AsyncClient, front: Frontend) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in (await http.get(f"{front.base_url}/v1/models")).json()["data"]}


async def _served(http: httpx.AsyncClient, front: Frontend) -> float:
    """Requests `front` finished (all finish reasons), from its /metrics."""
    text = (await http.get(f"{front.base_url}/metrics")).text
    return sum(float(v) for v in re.findall(r"^vllm:request_success_total\{[^}]*\} (\S+)$", text, re.M))


async def test_an_adapter_loaded_on_the_worker_is_served_through_the_router_at_once_and_gone_once_unloaded(
    cluster: LoraCluster,
) -> None:
    worker, router = cluster.workers[0], cluster.over_one
    texts: list[str] = []
    async with httpx.AsyncClient(timeout=120) as http:
        base = _text(await _complete(http, router, "tiny"))
        for i, path in enumerate((*cluster.adapters, cluster.adapters[0])):
            name = f"runtime-{i}"
            await _post_ok(http, worker, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
            routed = await _complete(http, router, name)  # at once: the router has never seen this name
            texts.append(_text(routed))
            assert routed.json()["model"] == name
            assert texts[-1] == _text(await _complete(http, worker, name)) != base
            card = (await _cards(http, router))[name]
            assert (card["root"], card["parent"]) == (path, "tiny")
            await _post_ok(http, worker, "/v1/unload_lora_adapter", {"lora_name": name})
            gone = await _complete(http, router, name)  # at once: the router still lists it
            assert _not_found(gone), gone.text
            assert _not_found(await _complete(http, worker, name))
            assert name not in await _cards(http, router)
    # Each load took the id the unload before it freed. Had the request after an unload loaded the adapter
    # into the engine again, the next adapter would run with its weights under that id.
    assert texts[1] != texts[0] and texts[2] == texts[0], texts


async def test_an_adapter_on_one_of_two_workers_is_served_by_that_worker_only(cluster: LoraCluster) -> None:
    (first, second), router = cluster.workers, cluster.over_both
    name = "first-only"
    async with httpx.AsyncClient(timeout=120) as http:
        await _post_ok(
            http, first, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": cluster.adapters[0]}
        )
        try:
            expected = _text(await _complete(http, first, name))
            before = [await _served(http, w) for w in (first, second)]
            answers = [await _complete(http, router, name) for _ in range(8)]
            served = [_text(a) for a in answers if a.status_code == 200]
            assert all(a.status_code == 200 or _not_found(a) for a in answers), [a.text for a in answers]
            # Round robin alternates the workers: some requests land on each.
            assert served and len(served) < len(answers), [a.status_code for a in answers]
            assert set(served) == {expected}

            async def counted() -> bool:
                grown = [await _served(http, w) - b for w, b in zip((first, second), before, strict=True)]
                return sum(grown) >= len(served)

            await until(counted, within=10, what="the served requests counted on the workers")
            assert await _served(http, second) == before[1], "a worker that never loaded the adapter ran it"
            assert await _served(http, first) - before[0] == len(served)
        finally:
            await _post_ok(http, first, "/v1/unload_lora_adapter", {"lora_name": name})
