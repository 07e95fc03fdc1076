"""`POST /v1/responses` over any Llm: the official `openai` client against a router (hermes tool calls and
deepseek_r1 reasoning parsed at the router) over a worker whose MockLlm replays a scripted model output."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from openai import AsyncOpenAI

from tests.support.cluster import open_parsing_cluster
from tests.support.servers import RunningServer
from vllm_llm import MockLlm
from vllm_llm.text import TextTokenizer

REASONING = "The user wants the weather; I should call the tool."
OUTPUT = (
    f"<think>{REASONING}</think>Let me look that up.<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
)
TOOLS: Any = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


class Routed:
    def __init__(self, mock: MockLlm, router: RunningServer, tokenizer: TextTokenizer) -> None:
        self.mock = mock
        self.router = router
        self.tokenizer = tokenizer
        self.client = AsyncOpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0)
        self.http = httpx.AsyncClient(base_url=router.base_url)

    def last_prompt(self) -> str:
        return self.tokenizer.decode(list(self.mock.requests[-1].prompt_token_ids or ()))


@pytest_asyncio.fixture
async def routed(tiny_model_dir: Path) -> AsyncIterator[Routed]:
    """worker (MockLlm, no parsers) ← RemoteLlm ← router (hermes + deepseek_r1)."""
    tokenizer = TextTokenizer.from_dir(tiny_model_dir)
    async with open_parsing_cluster(tiny_model_dir) as cluster:
        cluster.mock.script = tokenizer.encode(OUTPUT, add_special_tokens=False)
        out = Routed(cluster.mock, cluster.router, tokenizer)
        try:
            yield out
        finally:
            await out.client.close()
            await out.http.aclose()


async def test_a_response_carries_reasoning_a_message_and_a_function_call(routed: Routed) -> None:
    response = await routed.client.responses.create(
        model="tiny", input="Weather in Paris?", tools=TOOLS, max_output_tokens=200
    )
    assert response.status == "completed"
    assert [item.type for item in response.output] == ["reasoning", "message", "function_call"]
    reasoning, message, call = response.output
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == REASONING
    assert message.type == "message" and message.content[0].type == "output_text"
    assert message.content[0].text == "Let me look that up."
    assert response.output_text == "Let me look that up."
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id and call.id and call.id.startswith("fc_")
    usage = response.usage
    assert usage is not None
    assert usage.output_tokens == len(routed.mock.script or ()) + 1  # the script, then eos
    assert usage.input_tokens == len(routed.mock.requests[-1].prompt_token_ids or ())
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    script = list(routed.mock.script or ())
    think, end = (script.index(routed.tokenizer.token_to_id(m) or -1) for m in ("<think>", "</think>"))
    assert usage.output_tokens_details.reasoning_tokens == end - think - 1
    assert response.tools[0].type == "function" and response.tools[0].name == "get_weather"
    assert response.tool_choice == "auto"


async def test_the_stream_emits_vllms_event_sequence(routed: Routed) -> None:
    stream = await routed.client.responses.create(
        model="tiny", input="Weather in Paris?", tools=TOOLS, max_output_tokens=200, stream=True
    )
    events = [event async for event in stream]
    kinds = [e.type for e in events]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k]
    assert collapsed == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "Let me look that up."
    reasoning = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert reasoning.removeprefix("<think>") == REASONING
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    assert json.loads(args) == {"city": "Paris"}
    final = events[-1]
    assert final.type == "response.completed"
    assert [i.type for i in final.response.output] == ["reasoning", "message", "function_call"]
    added = [e.item.id for e in events if e.type == "response.output_item.added"]
    assert [i.id for i in final.response.output] == added
    assert final.response.usage is not None
    assert final.response.usage.output_tokens == len(routed.mock.script or ()) + 1


async def test_a_function_call_round_trip_reaches_the_template(routed: Routed) -> None:
    first = await routed.client.responses.create(
        model="tiny", input="Weather in Paris?", tools=TOOLS, max_output_tokens=200
    )
    call = next(item for item in first.output if item.type == "function_call")
    follow_up: Any = [
        {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
        *[item.model_dump(exclude_none=True) for item in first.output],
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"},
    ]
    await routed.client.responses.create(
        model="tiny", input=follow_up, tools=TOOLS, instructions="Be brief.", max_output_tokens=20
    )
    prompt = routed.last_prompt()
    assert "Be brief." in prompt
    assert "sunny, 21 C" in prompt  # the tool's output, as the template renders a tool message
    assert '"get_weather"' in prompt and "Paris" in prompt  # the assistant's call before it


BAD: list[tuple[str, dict[str, Any], int]] = [
    ("unknown-item", {"input": [{"type": "web_search_call", "id": "x"}]}, 400),
    ("web-search-tool", {"input": "hi", "tools": [{"type": "web_search"}]}, 400),
    ("previous-response-id", {"input": "hi", "previous_response_id": "resp_123"}, 404),
    ("call-without-name", {"input": [{"type": "function_call", "call_id": "c", "arguments": "{}"}]}, 400),
    ("bad-part", {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, 400),
    ("item-not-object", {"input": [3]}, 400),
    ("input-missing", {}, 400),
    ("background", {"input": "hi", "background": True}, 400),
    ("required-without-tools", {"input": "hi", "tool_choice": "required"}, 400),
    (
        "unknown-named-tool",
        {"input": "hi", "tools": TOOLS, "tool_choice": {"type": "function", "name": "x"}},
        400,
    ),
    ("encrypted-reasoning", {"input": [{"type": "reasoning", "summary": [], "encrypted_content": "z"}]}, 400),
]


@pytest.mark.parametrize(("case", "body", "status"), BAD, ids=[c for c, _, _ in BAD])
async def test_bad_input_is_a_4xx_openai_error(
    case: str, body: dict[str, Any], status: int, routed: Routed
) -> None:
    response = await routed.http.post("/v1/responses", json={"model": "tiny", **body})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and error["message"] and error["type"]


async def test_previous_response_id_gets_vllms_not_found(routed: Routed) -> None:
    response = await routed.http.post(
        "/v1/responses", json={"model": "tiny", "input": "hi", "previous_response_id": "resp_123"}
    )
    assert response.json()["error"]["message"] == "Response with id 'resp_123' not found."
