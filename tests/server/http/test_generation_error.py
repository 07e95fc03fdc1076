"""An engine that ends a request with finish reason `error` (a failed KV load, for one) gets vLLM's answer:
its serving layer raises GenerationError("Internal server error") for every text and token route, a 500
with type InternalServerError, or that error as an SSE event when streaming — never a 200 whose choice
"finished" with reason "error"."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.support.delegating import DelegatingLlm
from tests.support.http_serving import MODEL, serve, server_state
from tests.support.mock import tiny_mock
from vllm_llm import GenerateStream, MockLlm
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest

#: vLLM's body for GenerationError (entrypoints/serve/exception_handling/error_response.py).
VLLM_ERROR = {"message": "Internal server error", "type": "InternalServerError", "param": None, "code": 500}


class FailsGenerating(DelegatingLlm):
    """The inner Llm's outputs, its final one turned into an ERROR finish."""

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        inner = await self.inner.generate(request)

        async def outputs() -> AsyncIterator[GenerateOutput]:
            async for out in inner:
                if out.finish_reason is not None:
                    out.finish_reason = FinishReason.ERROR
                yield out

        return GenerateStream(request.request_id, outputs(), inner.aclose)


CHAT = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
ROUTES: dict[str, tuple[str, dict[str, Any]]] = {
    # one choice and nothing to detokenize-and-match: the routes read the Llm's raw outputs
    "completions-raw": ("/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 4}),
    "chat-raw": ("/v1/chat/completions", CHAT),
    "generate": ("/inference/v1/generate", {"token_ids": [5, 6, 7], "sampling_params": {"max_tokens": 4}}),
    # stop strings and n > 1 go through the text layer
    "completions-text": ("/v1/completions", {"model": MODEL, "prompt": "hello", "max_tokens": 4, "n": 2}),
    "chat-text": ("/v1/chat/completions", {**CHAT, "stop": ["never-said"]}),
}


@pytest.mark.parametrize(("path", "body"), ROUTES.values(), ids=ROUTES.keys())
async def test_an_engine_error_is_vllms_500(tiny_model_dir: Any, path: str, body: dict[str, Any]) -> None:
    mock: MockLlm = tiny_mock(tiny_model_dir)
    async with serve(server_state(FailsGenerating(mock))) as served:
        whole = await served.http.post(path, json=body)
        assert whole.status_code == 500, whole.text
        assert whole.json() == {"error": VLLM_ERROR}

        async with served.http.stream("POST", path, json={**body, "stream": True}) as streamed:
            assert streamed.status_code == 200
            events = [line[6:] async for line in streamed.aiter_lines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]", events
        assert json.loads(events[-2]) == {"error": VLLM_ERROR}, events
        assert all("error" not in json.loads(e) for e in events[:-2])
    assert mock.num_running == 0
    await mock.shutdown()
