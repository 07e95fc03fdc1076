"""Bad input gets a typed 4xx OpenAI-style body and the server keeps serving; disconnects abort."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest

from tests.support.http_serving import MODEL, Served, serve, server_state
from vllm_llm import MockLlm
from vllm_llm.wire import LlmInfo

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
GENERATE = "/inference/v1/generate"
USER = [{"role": "user", "content": "hi"}]


def assert_error(body: Any, status: int, type_: str, param: str | None = None) -> None:
    """vLLM's ErrorResponse shape."""
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["code"], error["type"]) == (status, type_)
    assert error["message"]
    if param is not None:
        assert error["param"] == param


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (COMPLETIONS, {"prompt": "hi", "max_tokens": -1}, "max_tokens"),
        (COMPLETIONS, {"prompt": "hi", "n": 0}, None),
        (COMPLETIONS, {"prompt": "hi", "top_p": 1.5}, "top_p"),
        (COMPLETIONS, {"prompt": ""}, "prompt"),
        (COMPLETIONS, {"prompt": [1, "x"]}, "prompt"),
        (COMPLETIONS, {"prompt": "hi", "max_tokens": 100000}, "max_tokens"),
        (COMPLETIONS, {"prompt": "hi", "stream_options": {"include_usage": True}}, "stream_options"),
        (COMPLETIONS, {"prompt": "hi", "logit_bias": {"abc": 1.0}}, "logit_bias"),
        (COMPLETIONS, {"prompt": "hi", "logprobs": 50}, "logprobs"),
        (CHAT, {"messages": USER, "max_tokens": -5}, "max_tokens"),
        (CHAT, {"messages": USER, "top_logprobs": 2}, "top_logprobs"),
        (CHAT, {"messages": USER, "tools": []}, "tools"),
        (GENERATE, {"token_ids": [], "sampling_params": {}}, "token_ids"),
        (GENERATE, {"token_ids": [1, -2], "sampling_params": {}}, "token_ids"),
        (GENERATE, {"token_ids": [1, 2], "sampling_params": {"max_tokens": 0}}, "max_tokens"),
    ],
)
async def test_bad_request(mock_server: Served, path: str, body: dict[str, Any], param: str | None) -> None:
    r = await mock_server.http.post(path, json=body)
    assert r.status_code == 400, r.text
    assert_error(r.json(), 400, "BadRequestError", param)
    ok = await mock_server.http.post(COMPLETIONS, json={"prompt": "hi", "max_tokens": 1})
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        (COMPLETIONS, {"prompt": "hi", "max_tokens": "many"}, "body.max_tokens"),
        (COMPLETIONS, {"prompt": "hi", "temperature": "hot"}, "body.temperature"),
        (CHAT, {"messages": "hi"}, "body.messages"),
        (CHAT, {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}, None),
        (GENERATE, {"token_ids": [1, 2]}, "body.sampling_params"),
    ],
)
async def test_invalid_body(mock_server: Served, path: str, body: dict[str, Any], param: str | None) -> None:
    """A body that fails validation: vLLM's validation handler's type, the field's location as param."""
    r = await mock_server.http.post(path, json=body)
    assert r.status_code == 400, r.text
    assert_error(r.json(), 400, "Bad Request", param)
    assert r.json()["error"]["message"].startswith("1 validation error:\n  {'type': ")


@pytest.mark.parametrize("path", [COMPLETIONS, CHAT, GENERATE, "/tokenize"])
async def test_malformed_json_and_media_type(mock_server: Served, path: str) -> None:
    r = await mock_server.http.post(
        path, content=b'{"prompt": ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 400
    assert_error(r.json(), 400, "Bad Request", "body.11")
    r = await mock_server.http.post(path, content=b"prompt=hi", headers={"content-type": "text/plain"})
    assert r.status_code == 400
    assert "application/json" in r.json()["error"]["message"]


async def test_openai_client_sees_typed_errors(mock_server: Served) -> None:
    client = mock_server.client
    with pytest.raises(openai.NotFoundError) as not_found:
        await client.completions.create(model="missing", prompt="hi")
    assert_error(not_found.value.response.json(), 404, "NotFoundError", "model")
    assert "The model `missing` does not exist." in not_found.value.response.json()["error"]["message"]
    with pytest.raises(openai.NotFoundError):
        await client.chat.completions.create(model="missing", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError) as too_long:
        await client.completions.create(model=MODEL, prompt="hello " * 600)
    assert "maximum context length is 512 tokens" in too_long.value.response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError) as too_long_chat:
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi " * 600}])
    assert "maximum context length" in too_long_chat.value.response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError):
        await client.completions.create(model=MODEL, prompt="hi", max_tokens=-1)
    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], n=0)
    resp = await client.completions.create(model=MODEL, prompt="still serving", max_tokens=2)
    assert resp.usage is not None and resp.usage.completion_tokens == 2


async def test_draining_server_refuses_new_requests(mock_server: Served) -> None:
    mock_server.state.begin_drain()
    r = await mock_server.http.post(COMPLETIONS, json={"prompt": "hi"})
    assert r.status_code == 503
    assert_error(r.json(), 503, "ServiceUnavailableError")


@pytest.mark.parametrize(
    ("path", "body"),
    [
        (COMPLETIONS, {"prompt": "hello", "max_tokens": 400, "stream": True}),
        (COMPLETIONS, {"prompt": ["hello", "world"], "max_tokens": 400, "stream": True}),
        (CHAT, {"messages": USER, "max_tokens": 400, "stream": True, "n": 2, "temperature": 1.0}),
        (GENERATE, {"token_ids": [1, 5, 6], "sampling_params": {"max_tokens": 400}, "stream": True}),
        (
            GENERATE,
            {"token_ids": [1, 5, 6], "sampling_params": {"max_tokens": 400, "stop": ["zz"]}, "stream": True},
        ),
    ],
)
async def test_disconnect_mid_stream_aborts(tiny_info: LlmInfo, path: str, body: dict[str, Any]) -> None:
    llm = MockLlm(info=tiny_info, step_interval=0.005)
    try:
        async with serve(server_state(llm)) as served:
            async with served.http.stream("POST", path, json=body) as response:
                assert response.status_code == 200
                lines = response.aiter_lines()
                seen = 0
                while seen < 3:
                    seen += (await anext(lines)).startswith("data: ")
                assert llm.num_running > 0
            for _ in range(400):
                if llm.num_running == 0 and served.state.metrics.in_flight == 0:
                    break
                await asyncio.sleep(0.01)
            assert llm.num_running == 0
            assert llm.aborted
            assert served.state.metrics.in_flight == 0
    finally:
        await llm.shutdown()
