"""Anthropic's Messages API (`/v1/messages`, `/v1/messages/count_tokens`) read by the official `anthropic`
client from a router over a worker: the router's chat layer parses tool calls (hermes) and thinking
(deepseek_r1) out of the worker's raw tokens.

The worker is a MockLlm replaying a scripted model output (`mock.script`), so tool calls, thinking and stop
sequences are deterministic.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from tests.support.cluster import open_parsing_cluster
from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from vllm_llm import MockLlm
from vllm_llm.text import TextTokenizer
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

THOUGHT = "The user wants the weather; I should call the tool."
TOOL_OUTPUT = (
    f"<think>{THOUGHT}</think>Let me look that up.<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>'
)
TOOLS: Any = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
            "required": ["city"],
        },
    }
]
ASK: Any = [{"role": "user", "content": "Weather in Paris?"}]
KEY = "sk-test-anthropic"


class Routed:
    def __init__(self, mock: MockLlm, router: RunningServer, tokenizer: TextTokenizer) -> None:
        self.mock = mock
        self.router = router
        self.tokenizer = tokenizer
        self.client = anthropic.AsyncAnthropic(base_url=router.base_url, api_key="unused", max_retries=0)
        self.openai = AsyncOpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0)
        self.http = httpx.AsyncClient(base_url=router.base_url, timeout=30)

    def script(self, text: str) -> None:
        self.mock.script = self.tokenizer.encode(text, add_special_tokens=False)

    def last_prompt(self) -> list[int]:
        return list(self.mock.requests[-1].prompt_token_ids or ())


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def routed(tiny_model_dir: Path) -> AsyncIterator[Routed]:
    """worker (MockLlm, no parsers) <- RemoteLlm <- router (hermes + deepseek_r1)."""
    async with open_parsing_cluster(tiny_model_dir) as cluster:
        out = Routed(cluster.mock, cluster.router, TextTokenizer.from_dir(tiny_model_dir))
        try:
            yield out
        finally:
            await out.client.close()
            await out.openai.close()
            await out.http.aclose()


# ---- messages.create ----------------------------------------------------------------------------------


async def test_create_gives_thinking_text_and_tool_use_blocks(routed: Routed) -> None:
    routed.script(TOOL_OUTPUT)
    message = await routed.client.messages.create(model="tiny", max_tokens=200, messages=ASK, tools=TOOLS)
    assert message.type == "message" and message.role == "assistant" and message.model == "tiny"
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    thinking, text, call = message.content
    assert thinking.type == "thinking" and thinking.thinking == THOUGHT and thinking.signature
    assert text.type == "text" and text.text == "Let me look that up."
    assert call.type == "tool_use" and call.name == "get_weather"
    assert call.input == {"city": "Paris", "unit": "c"} and call.id.startswith("chatcmpl-tool-")
    assert message.stop_reason == "tool_use" and message.stop_sequence is None
    # usage: the prompt the worker got and every token it produced (the script and its eos)
    assert message.usage.input_tokens == len(routed.last_prompt())
    assert message.usage.output_tokens == len(routed.mock.script or ()) + 1


async def test_the_request_becomes_the_chat_request_vllm_makes_of_it(routed: Routed) -> None:
    """system, tools (auto choice), max_tokens, temperature, top_p, top_k and stop_sequences reach the
    worker as the equivalent chat completion sends them."""
    routed.script("Fine.")
    await routed.client.messages.create(
        model="tiny",
        max_tokens=7,
        system=[{"type": "text", "text": "Be brief."}],
        messages=ASK,
        tools=TOOLS,
        stop_sequences=["zz"],
        # this client version no longer names the sampling fields; vLLM's request still takes them
        extra_body={"temperature": 0.5, "top_p": 0.9, "top_k": 5},
    )
    ours = routed.mock.requests[-1]
    await routed.openai.chat.completions.create(
        model="tiny",
        max_tokens=7,
        messages=[{"role": "system", "content": "Be brief."}, *ASK],
        tools=[
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                },
            }
            for t in TOOLS
        ],
        temperature=0.5,
        top_p=0.9,
        stop=["zz"],
        extra_body={"top_k": 5},
    )
    chat = routed.mock.requests[-1]
    assert ours.prompt_token_ids == chat.prompt_token_ids
    theirs, mine = chat.sampling_params, ours.sampling_params
    for field in ("max_tokens", "temperature", "top_p", "top_k", "structured_outputs"):
        assert getattr(mine, field) == getattr(theirs, field), field
    assert mine.max_tokens == 7 and mine.temperature == 0.5 and mine.top_k == 5


async def test_a_tool_use_round_trip(routed: Routed) -> None:
    """The tool_use block goes out; the client sends it back with a tool_result block; the prompt the
    worker gets is the one the same conversation renders to as chat completions (tool call + tool
    message), and the model's answer comes back as text."""
    routed.script(TOOL_OUTPUT)
    first = await routed.client.messages.create(model="tiny", max_tokens=200, messages=ASK, tools=TOOLS)
    call = next(b for b in first.content if b.type == "tool_use")
    routed.script("<think>Sunny.</think>It is 21 degrees in Paris.")
    second = await routed.client.messages.create(
        model="tiny",
        max_tokens=200,
        tools=TOOLS,
        messages=[
            *ASK,
            {"role": "assistant", "content": first.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "21 C, sunny"}],
            },
        ],
    )
    assert [b.type for b in second.content] == ["thinking", "text"]
    assert second.content[1].type == "text" and second.content[1].text == "It is 21 degrees in Paris."
    assert second.stop_reason == "end_turn"
    ours = routed.last_prompt()
    assert "21 C, sunny" in routed.tokenizer.decode(ours)
    chat_tools: Any = [
        {
            "type": "function",
            "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
        }
        for t in TOOLS
    ]
    chat_messages: Any = [
        *ASK,
        {
            "role": "assistant",
            "content": "Let me look that up.",
            "reasoning": THOUGHT,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(call.input)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": "21 C, sunny"},
    ]
    await routed.openai.chat.completions.create(
        model="tiny", max_tokens=200, tools=chat_tools, messages=chat_messages
    )
    assert routed.last_prompt() == ours


async def test_stop_sequences(routed: Routed) -> None:
    routed.script("</think>Hello world, and goodbye.")  # deepseek_r1: reasoning until </think>
    message = await routed.client.messages.create(
        model="tiny", max_tokens=50, messages=ASK, stop_sequences=["world"]
    )
    assert message.stop_reason == "stop_sequence" and message.stop_sequence == "world"
    assert message.content[0].type == "text" and message.content[0].text == "Hello "
    length = await routed.client.messages.create(model="tiny", max_tokens=2, messages=ASK)
    assert length.stop_reason == "max_tokens" and length.usage.output_tokens == 2


# ---- messages.stream ----------------------------------------------------------------------------------


async def test_stream_sends_anthropics_event_sequence(routed: Routed) -> None:
    routed.script(TOOL_OUTPUT)
    events: list[Any] = []
    async with routed.client.messages.stream(
        model="tiny", max_tokens=200, messages=ASK, tools=TOOLS
    ) as stream:
        async for event in stream:
            events.append(event)
        final = await stream.get_final_message()
    raw = [e for e in events if e.type not in ("text", "thinking", "input_json", "signature")]
    kinds = [e.type for e in raw]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    # three blocks, in order: thinking, text, tool_use; each opened, filled and closed
    starts = [e for e in raw if e.type == "content_block_start"]
    assert [(e.index, e.content_block.type) for e in starts] == [
        (0, "thinking"),
        (1, "text"),
        (2, "tool_use"),
    ]
    assert [e.index for e in raw if e.type == "content_block_stop"] == [0, 1, 2]
    deltas = [e.delta.type for e in raw if e.type == "content_block_delta"]
    assert deltas.index("signature_delta") < deltas.index("text_delta") < deltas.index("input_json_delta")
    assert "thinking_delta" in deltas
    assert not any(e.type == "ping" for e in raw)  # vLLM sends none
    # the assembled message is the whole one
    assert [b.type for b in final.content] == ["thinking", "text", "tool_use"]
    thinking, text, call = final.content
    assert thinking.type == "thinking" and thinking.thinking.removeprefix("<think>") == THOUGHT
    assert text.type == "text" and text.text == "Let me look that up."
    assert call.type == "tool_use" and call.input == {"city": "Paris", "unit": "c"}
    assert final.stop_reason == "tool_use"
    start = raw[0]
    assert start.message.usage.input_tokens == len(routed.last_prompt())
    assert start.message.usage.output_tokens == 0
    assert final.usage.output_tokens == len(routed.mock.script or ()) + 1


async def _stream_payloads(http: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The data of each SSE frame, checking that each frame names its event (`event: <type>`)."""
    async with http.stream("POST", "/v1/messages", json={**body, "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        text = "".join([chunk async for chunk in response.aiter_text()])
    payloads = []
    for frame in filter(None, text.split("\n\n")):
        event, data = frame.split("\n")
        payload = json.loads(data.removeprefix("data: "))
        assert event == f"event: {payload['type']}"
        payloads.append(payload)
    return payloads


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def unparsed(tiny_model_dir: Path) -> AsyncIterator[tuple[MockLlm, httpx.AsyncClient]]:
    """A server over a MockLlm without a reasoning parser."""
    mock = tiny_mock(tiny_model_dir, step_interval=0.0005)
    server = await start_server(ServerConfig(port=0, grpc_port=None), LlmSource.provided(mock))
    http = httpx.AsyncClient(base_url=server.base_url, timeout=30)
    yield mock, http
    await http.aclose()
    await server.stop()
    await mock.shutdown()


STOP_BODY: dict[str, Any] = {"model": "tiny", "max_tokens": 50, "messages": ASK, "stop_sequences": ["world"]}


async def test_stream_stop_sequence_and_wire_format(
    unparsed: tuple[MockLlm, httpx.AsyncClient], tiny_model_dir: Path
) -> None:
    mock, http = unparsed
    mock.script = TextTokenizer.from_dir(tiny_model_dir).encode("Hello world, bye.", add_special_tokens=False)
    payloads = await _stream_payloads(http, STOP_BODY)
    assert [p["type"] for p in payloads] == [
        "message_start",
        "content_block_start",
        *["content_block_delta"] * (len(payloads) - 5),
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert payloads[1]["content_block"] == {"type": "text", "text": ""}
    assert "".join(p["delta"]["text"] for p in payloads if p["type"] == "content_block_delta") == "Hello "
    assert payloads[-2]["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "world"}


async def test_stream_stop_sequence_after_thinking(routed: Routed) -> None:
    """The stop sequence holds text back; the reasoning parser still reads `</think>` whole."""
    routed.script("<think>Short.</think>Hello world, bye.")
    payloads = await _stream_payloads(routed.http, STOP_BODY)
    deltas = [p["delta"] for p in payloads if p["type"] == "content_block_delta"]
    # "<think>" kept when deltas coalesce, as in test_stream_sends_anthropics_event_sequence
    assert "".join(d.get("thinking", "") for d in deltas).removeprefix("<think>") == "Short."
    assert "".join(d.get("text", "") for d in deltas) == "Hello "


# ---- count_tokens -------------------------------------------------------------------------------------


async def test_count_tokens_counts_the_prompt_the_worker_gets(routed: Routed) -> None:
    routed.script("Fine.")
    system = "Be brief."
    counted = await routed.client.messages.count_tokens(
        model="tiny", system=system, messages=ASK, tools=TOOLS
    )
    await routed.client.messages.create(model="tiny", max_tokens=5, system=system, messages=ASK, tools=TOOLS)
    assert counted.input_tokens == len(routed.last_prompt()) > 0
    plain = await routed.client.messages.count_tokens(model="tiny", messages=ASK)
    assert plain.input_tokens < counted.input_tokens  # the tools and the system prompt count


# ---- bad input ----------------------------------------------------------------------------------------

BAD: list[tuple[str, dict[str, Any], int]] = [
    ("missing-max-tokens", {"model": "tiny", "messages": ASK}, 400),
    (
        "unknown-block-type",
        {"model": "tiny", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "video"}]}]},
        400,
    ),
    (
        "malformed-text-block",
        {
            "model": "tiny",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": [{"type": "text", "text": 7}]}],
        },
        400,
    ),
    (
        "malformed-tool-use-input",
        {
            "model": "tiny",
            "max_tokens": 5,
            "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}
            ],
        },
        400,
    ),
    (
        "server-tool",
        {
            "model": "tiny",
            "max_tokens": 5,
            "messages": ASK,
            "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        },
        400,
    ),
    (
        "server-tool-with-schema",
        {
            "model": "tiny",
            "max_tokens": 5,
            "messages": ASK,
            "tools": [{"type": "bash_20250124", "name": "bash", "input_schema": {"type": "object"}}],
        },
        400,
    ),
    ("zero-max-tokens", {"model": "tiny", "max_tokens": 0, "messages": ASK}, 400),
    ("bad-role", {"model": "tiny", "max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]}, 400),
    (
        "tool-choice-without-name",
        {"model": "tiny", "max_tokens": 5, "messages": ASK, "tools": TOOLS, "tool_choice": {"type": "tool"}},
        400,
    ),
    (
        "tool-choice-unknown-tool",
        {
            "model": "tiny",
            "max_tokens": 5,
            "messages": ASK,
            "tools": TOOLS,
            "tool_choice": {"type": "tool", "name": "nope"},
        },
        400,
    ),
    (
        "thinking-budget-over-max-tokens",
        {
            "model": "tiny",
            "max_tokens": 2000,
            "messages": ASK,
            "thinking": {"type": "enabled", "budget_tokens": 4096},
        },
        400,
    ),
    (
        "thinking-budget-too-small",
        {
            "model": "tiny",
            "max_tokens": 5,
            "messages": ASK,
            "thinking": {"type": "enabled", "budget_tokens": 10},
        },
        400,
    ),
    (
        "tool-addition-outside-system",
        {
            "model": "tiny",
            "max_tokens": 5,
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "tool_addition", "tool": {"type": "tool_reference", "name": "x"}}],
                }
            ],
        },
        400,
    ),
    (
        "too-many-stop-sequences",
        {"model": "tiny", "max_tokens": 5, "messages": ASK, "stop_sequences": ["a", "b", "c", "d", "e"]},
        400,
    ),
    ("not-json", {}, 400),
    ("unknown-model", {"model": "nope", "max_tokens": 5, "messages": ASK}, 404),
    ("max-tokens-over-context", {"model": "tiny", "max_tokens": 100_000, "messages": ASK}, 400),
]


#: Cases about fields count_tokens does not take (max_tokens, stop_sequences).
MESSAGES_ONLY = frozenset(
    {
        "missing-max-tokens",
        "zero-max-tokens",
        "max-tokens-over-context",
        "thinking-budget-over-max-tokens",
        "too-many-stop-sequences",
    }
)


@pytest.mark.parametrize(("case", "body", "status"), BAD, ids=[c for c, _, _ in BAD])
async def test_bad_input_gets_anthropics_error_shape(
    case: str, body: dict[str, Any], status: int, routed: Routed
) -> None:
    paths = ["/v1/messages"] if case in MESSAGES_ONLY else ["/v1/messages", "/v1/messages/count_tokens"]
    for path in paths:
        if case == "not-json":
            response = await routed.http.post(
                path, content=b"{not json", headers={"content-type": "application/json"}
            )
        else:
            response = await routed.http.post(path, json=body)
        assert response.status_code == status, (path, response.text)
        error = response.json()
        assert error["type"] == "error", error
        assert set(error["error"]) == {"type", "message"} and error["error"]["message"], error


async def test_the_client_raises_its_typed_errors(routed: Routed) -> None:
    unknown_block: Any = [{"role": "user", "content": [{"type": "nope"}]}]
    with pytest.raises(anthropic.BadRequestError) as bad:
        await routed.client.messages.create(model="tiny", max_tokens=5, messages=unknown_block)
    assert bad.value.status_code == 400
    assert isinstance(bad.value.body, dict) and bad.value.body["type"] == "error"
    with pytest.raises(anthropic.NotFoundError):
        await routed.client.messages.create(model="nope", max_tokens=5, messages=ASK)


# ---- the API key --------------------------------------------------------------------------------------


async def test_x_api_key_is_accepted_as_the_api_key(tiny_model_dir: Path) -> None:
    mock = tiny_mock(tiny_model_dir)
    server = await start_server(ServerConfig(port=0, grpc_port=None, api_key=KEY), LlmSource.provided(mock))
    try:
        for client in (
            anthropic.AsyncAnthropic(base_url=server.base_url, api_key=KEY, max_retries=0),  # x-api-key
            anthropic.AsyncAnthropic(base_url=server.base_url, auth_token=KEY, max_retries=0),  # Bearer
        ):
            message = await client.messages.create(model="tiny", max_tokens=3, messages=ASK)
            assert message.usage.output_tokens == 3
            await client.close()
        wrong = anthropic.AsyncAnthropic(base_url=server.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(anthropic.AuthenticationError) as denied:
            await wrong.messages.count_tokens(model="tiny", messages=ASK)
        await wrong.close()
        body = denied.value.body
        assert isinstance(body, dict) and body["type"] == "error" and body["error"]["type"]
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            # other routes take the key from x-api-key too, and keep the OpenAI error shape
            assert (await http.get("/v1/models", headers={"x-api-key": KEY})).status_code == 200
            assert (
                await http.get("/v1/models", headers={"authorization": f"bearer {KEY}"})
            ).status_code == 200
            refused = await http.get("/v1/models", headers={"x-api-key": "wrong"})
            assert refused.status_code == 401 and "type" not in refused.json()
    finally:
        await server.stop()
        await mock.shutdown()
