"""Harmony (gpt-oss) over /v1/chat/completions with the official `openai` client, on a worker and on a
router over it: the router adopts model_type from the worker's LlmInfo and renders and parses Harmony
itself. The worker is a MockLlm replaying a Harmony-encoded output (reasoning, then a tool call)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from openai import AsyncOpenAI, BadRequestError
from openai_harmony import HarmonyEncodingName, load_harmony_encoding  # type: ignore[import-untyped]

from tests.llm.test_harmony import OUTPUTS, harmony_info
from tests.llm.test_harmony import TOOLS as _TOOLS
from tests.support.harmony_model import CALL, build_harmony_model
from tests.support.servers import RunningServer, start_server
from vllm_llm import MockLlm, ParserOptions
from vllm_remote_llm import RemoteLlm
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

ENCODING = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
TOOLS: Any = _TOOLS  # typed Any: the openai client's TypedDicts are not what a test builds
MESSAGES: Any = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
PARSERS = ParserOptions(enable_auto_tool_choice=True, tool_call_parser="openai")


class Served:
    def __init__(self, mock: MockLlm, worker: RunningServer, router: RunningServer) -> None:
        self.mock = mock
        self.clients = {
            "worker": AsyncOpenAI(base_url=f"{worker.base_url}/v1", api_key="unused", max_retries=0),
            "router": AsyncOpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0),
        }


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Served]:
    """worker (MockLlm gpt_oss, openai tool parser) ← RemoteLlm ← router (openai tool parser)."""
    model = build_harmony_model(tmp_path_factory.mktemp("harmony"))
    mock = MockLlm(info=harmony_info(model), step_interval=0.0005)
    mock.script = ENCODING.encode(OUTPUTS["tool_call"], allowed_special="all")
    worker = await start_server(ServerConfig(port=0, grpc_port=0, parsers=PARSERS), LlmSource.provided(mock))
    remote = await RemoteLlm.connect(worker.grpc_target)
    router = await start_server(
        ServerConfig(port=0, grpc_port=None, parsers=PARSERS), LlmSource.provided(remote)
    )
    out = Served(mock, worker, router)
    try:
        yield out
    finally:
        for client in out.clients.values():
            await client.close()
        await router.stop()
        await remote.shutdown()
        await worker.stop()
        await mock.shutdown()


SIDES = ["worker", "router"]


@pytest.mark.parametrize("side", SIDES)
async def test_whole_reply_has_reasoning_and_the_tool_call(side: str, served: Served) -> None:
    response = await served.clients[side].chat.completions.create(
        model="gpt-oss-tiny", messages=MESSAGES, tools=TOOLS, reasoning_effort="high", max_tokens=100
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert (choice.message.model_extra or {})["reasoning"] == "Need the weather."
    assert choice.message.content is None
    calls: list[Any] = list(choice.message.tool_calls or [])
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert response.usage is not None and response.usage.completion_tokens_details is not None
    assert response.usage.completion_tokens_details.reasoning_tokens == len(
        ENCODING.encode("Need the weather.")
    ) + len(ENCODING.encode('{"city":  "Paris"}'))  # analysis and the call's arguments, as vLLM counts
    sent = served.mock.requests[-1]
    prompt = ENCODING.decode(sent.prompt_token_ids)
    assert prompt.endswith("<|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant")
    assert "Reasoning: high" in prompt and "# Instructions\n\nBe brief." in prompt
    assert CALL in (sent.sampling_params.stop_token_ids or [])  # gpt-oss's eos ids from its generation config


@pytest.mark.parametrize("side", SIDES)
async def test_streamed_reply_assembles_to_the_same(side: str, served: Served) -> None:
    stream = await served.clients[side].chat.completions.create(
        model="gpt-oss-tiny", messages=MESSAGES, tools=TOOLS, max_tokens=100, stream=True
    )
    reasoning, arguments, names, finish = "", "", [], []
    async for chunk in stream:
        for choice in chunk.choices:
            reasoning += (choice.delta.model_extra or {}).get("reasoning") or ""
            for call in choice.delta.tool_calls or []:
                if call.function is not None:
                    names += [call.function.name] if call.function.name else []
                    arguments += call.function.arguments or ""
            finish += [choice.finish_reason] if choice.finish_reason else []
    assert (reasoning, names, json.loads(arguments), finish) == (
        "Need the weather.",
        ["get_weather"],
        {"city": "Paris"},
        ["tool_calls"],
    )


@pytest.mark.parametrize("side", SIDES)
@pytest.mark.parametrize(
    "extra",
    [
        {"reasoning_effort": "none"},
        {"tool_choice": "required"},
        {"response_format": {"type": "json_object"}},
        {"messages": [{"role": "wizard", "content": "x"}]},
    ],
    ids=["effort_none", "required", "response_format", "unknown_role"],
)
async def test_bad_input_is_a_400(side: str, extra: dict[str, Any], served: Served) -> None:
    body: dict[str, Any] = {"model": "gpt-oss-tiny", "messages": MESSAGES, "tools": TOOLS, "max_tokens": 10}
    with pytest.raises(BadRequestError) as caught:
        await served.clients[side].chat.completions.create(**(body | extra))
    assert caught.value.status_code == 400


@pytest.mark.parametrize("side", SIDES)
async def test_a_requests_chat_template_is_not_checked(side: str, served: Served) -> None:
    """vLLM's render_chat checks a request's template only for a model it renders with one: a Harmony
    chat takes `chat_template` (and ignores it) without --trust-request-chat-template."""
    response = await served.clients[side].chat.completions.create(
        model="gpt-oss-tiny", messages=MESSAGES, max_tokens=100, extra_body={"chat_template": "{{ 1 }}"}
    )
    assert response.choices[0].finish_reason is not None
