"""The server flags the OpenAI routes honour, as vLLM's: --response-role, --enable-force-include-usage,
--return-tokens-as-token-ids and --sse-keep-alive-interval (each over a MockLlm)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.server.http.test_request_fields import MESSAGES, PROMPT, mock_served
from tests.support.http_serving import MODEL
from vllm_server.http.openai.sse import KEEP_ALIVE, event_stream

CHAT = {"model": MODEL, "messages": MESSAGES, "max_tokens": 3, "temperature": 0}
COMPLETION = {"model": MODEL, "prompt": PROMPT, "max_tokens": 3, "temperature": 0}


def events(raw: bytes) -> list[Any]:
    """The JSON data events of an SSE body (without [DONE] and comments)."""
    out = []
    for frame in raw.split(b"\n\n"):
        if frame.startswith(b"data: ") and frame != b"data: [DONE]":
            out.append(json.loads(frame[len(b"data: ") :]))
    return out


async def test_response_role(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, response_role="bot") as (served, _):
        whole = await served.http.post("/v1/chat/completions", json=CHAT)
        assert whole.json()["choices"][0]["message"]["role"] == "bot"
        stream = await served.http.post("/v1/chat/completions", json={**CHAT, "stream": True})
        assert events(stream.content)[0]["choices"][0]["delta"] == {"role": "bot", "content": ""}
        # without a generation prompt the role is the last message's (vLLM's get_chat_request_role)
        cont = [*MESSAGES, {"role": "assistant", "content": "Well"}]
        resp = await served.http.post(
            "/v1/chat/completions", json={**CHAT, "messages": cont, "add_generation_prompt": False}
        )
        assert resp.json()["choices"][0]["message"]["role"] == "assistant"


async def test_force_include_usage(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, enable_force_include_usage=True) as (served, _):
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)):
            resp = await served.http.post(path, json={**body, "stream": True})
            chunks = events(resp.content)
            *deltas, last = chunks
            # vLLM's should_include_usage: forced usage is continuous too, then the final usage chunk
            assert all("usage" in c for c in deltas), path
            assert last["choices"] == [] and last["usage"]["completion_tokens"] == 3, path
    async with mock_served(tiny_model_dir) as (served, _):
        resp = await served.http.post("/v1/chat/completions", json={**CHAT, "stream": True})
        assert all("usage" not in c for c in events(resp.content))


async def test_return_tokens_as_token_ids_flag(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, return_tokens_as_token_ids=True) as (served, _):
        chat = {**CHAT, "logprobs": True, "top_logprobs": 2, "return_token_ids": True}
        body = (await served.http.post("/v1/chat/completions", json=chat)).json()
        choice = body["choices"][0]
        content = choice["logprobs"]["content"]
        assert [c["token"] for c in content] == [f"token_id:{t}" for t in choice["token_ids"]]
        assert all(t["token"].startswith("token_id:") for c in content for t in c["top_logprobs"])
        completion = {**COMPLETION, "logprobs": 1, "return_token_ids": True, "stream": True}
        chunks = events((await served.http.post("/v1/completions", json=completion)).content)
        tokens = [t for c in chunks for t in c["choices"][0]["logprobs"]["tokens"]]
        ids = [t for c in chunks for t in c["choices"][0]["token_ids"]]
        assert tokens == [f"token_id:{t}" for t in ids]
        # the request's own false wins over the flag
        own = (
            await served.http.post("/v1/chat/completions", json={**chat, "return_tokens_as_token_ids": False})
        ).json()
        assert not own["choices"][0]["logprobs"]["content"][0]["token"].startswith("token_id:")


async def test_sse_keep_alive_while_the_engine_is_silent(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, sse_keep_alive_interval=0.05) as (served, llm):
        for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", COMPLETION)):
            llm.pause()  # the request is taken, but no token comes until resumed
            async with served.http.stream("POST", path, json={**body, "stream": True}) as resp:
                raw = resp.aiter_raw()
                first = await anext(raw)
                assert first.startswith(KEEP_ALIVE), first  # vLLM's ": keep-alive\n\n", before any data
                assert first.replace(KEEP_ALIVE, b"") == b""
                llm.resume()
                rest = b"".join([chunk async for chunk in raw])
            assert rest.endswith(b"data: [DONE]\n\n")
            assert any(c["choices"] and c["choices"][0]["finish_reason"] == "length" for c in events(rest))


async def test_sse_keep_alive_keeps_the_disconnect_watch(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, sse_keep_alive_interval=0.05) as (served, llm):
        llm.pause()
        async with served.http.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as resp:
            assert (await anext(resp.aiter_raw())).startswith(KEEP_ALIVE)
            assert llm.num_running == 1
        # the client went away: the engine request is aborted
        await asyncio.wait_for(llm.subscribe_running().wait_for(lambda n: n == 0), 30)
        assert llm.aborted and llm.aborted[-1].startswith("chatcmpl-")


async def test_a_client_gone_while_no_frame_flows_is_noticed(tiny_model_dir: Path) -> None:
    # No keep-alive, an engine that produces nothing: only the response's disconnect watch can see the
    # client leave (no write fails); the request must not wait for a token to be aborted.
    async with mock_served(tiny_model_dir) as (served, llm):
        llm.pause()
        async with served.http.stream("POST", "/v1/chat/completions", json={**CHAT, "stream": True}) as resp:
            assert resp.status_code == 200
            await asyncio.wait_for(llm.subscribe_running().wait_for(lambda n: n == 1), 30)
        await asyncio.wait_for(llm.subscribe_running().wait_for(lambda n: n == 0), 30)
        assert llm.aborted and llm.aborted[-1].startswith("chatcmpl-")


async def test_no_keep_alive_wrapper_without_an_interval() -> None:
    async def frames() -> AsyncIterator[bytes]:
        yield b"data: {}\n\n"

    source = frames()
    assert event_stream(source).body_iterator is source
    assert event_stream(source, 0.0).body_iterator is source
    assert event_stream(source, 1.0).body_iterator is not source
