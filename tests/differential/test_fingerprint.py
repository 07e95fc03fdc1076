"""`system_fingerprint` under vLLM's default `--fingerprint-mode full`, against vLLM's own server: the same
form (`vllm-VERSION-HASH8` for one engine), ours the one vLLM's code makes of our engine's config, and
stamped on the same chunks of a stream (each choice's last chunk, or only the usage chunk when one
follows). Each mode and a router's: tests/server/test_fingerprint.py."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest

from tests.differential.conftest import Pair
from vllm_llm import EngineCoreLlm

CHAT = ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}]})
CMPL = ("/v1/completions", {"prompt": "Hi"})


def _expected(engine_llm: EngineCoreLlm) -> str:
    from vllm.entrypoints.serve.utils.fingerprint import build_system_fingerprint

    fingerprint = build_system_fingerprint(engine_llm._vllm_config, "full")
    assert fingerprint is not None
    return fingerprint


@pytest.mark.parametrize(("path", "body"), [CHAT, CMPL], ids=["chat", "completions"])
async def test_a_whole_response(
    path: str, body: dict[str, Any], pair: Pair, engine_llm: EngineCoreLlm
) -> None:
    import vllm

    request = {"model": "tiny", "max_tokens": 3, "temperature": 0, **body}
    theirs = (await pair.theirs_http.post(path, json=request)).json()["system_fingerprint"]
    ours = (await pair.ours_http.post(path, json=request)).json()["system_fingerprint"]
    assert re.fullmatch(rf"vllm-{re.escape(vllm.__version__)}-[0-9a-f]{{8}}", theirs), theirs
    assert ours == _expected(engine_llm)


async def _stamped(http: httpx.AsyncClient, path: str, request: dict[str, Any]) -> list[tuple[str, Any]]:
    """Each chunk of a stream: its kind (a choice's last, the usage chunk, another) and its fingerprint
    (absent: None)."""
    chunks = []
    async with http.stream("POST", path, json=request) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line.removeprefix("data: "))
            finished = any(c.get("finish_reason") for c in chunk["choices"])
            kind = "finish" if finished else "usage" if "usage" in chunk and not chunk["choices"] else "other"
            chunks.append((kind, chunk.get("system_fingerprint")))
    return chunks


@pytest.mark.parametrize("include_usage", [False, True])
@pytest.mark.parametrize(("path", "body"), [CHAT, CMPL], ids=["chat", "completions"])
async def test_a_stream(
    path: str, body: dict[str, Any], include_usage: bool, pair: Pair, engine_llm: EngineCoreLlm
) -> None:
    request = {"model": "tiny", "max_tokens": 3, "temperature": 0.8, "seed": 1, "n": 2, **body}
    request |= {"stream": True, "stream_options": {"include_usage": include_usage}}
    theirs = await _stamped(pair.theirs_http, path, request)
    ours = await _stamped(pair.ours_http, path, request)
    last = ["finish", "finish", "usage"] if include_usage else ["finish", "finish"]
    for chunks in (theirs, ours):
        assert [kind for kind, _ in chunks if kind != "other"] == last, chunks
    stamped = ["usage"] if include_usage else ["finish", "finish"]
    assert [kind for kind, fp in theirs if fp is not None] == stamped, theirs
    assert [kind for kind, fp in ours if fp is not None] == stamped, ours
    assert {fp for _, fp in ours if fp is not None} == {_expected(engine_llm)}
