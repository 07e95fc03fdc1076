"""Parsing at the caller: a router over RemoteLlm parses tool calls and reasoning out of a worker's raw
tokens (the worker stays token-level), read by the official `openai` client whole and streamed.

The worker is a MockLlm replaying a scripted model output (its `script`): what a Qwen-style model with
hermes tool calls and deepseek_r1 reasoning would emit.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from openai import AsyncOpenAI, BadRequestError

from tests.support.cluster import open_parsing_cluster
from tests.support.servers import RunningServer
from vllm_llm import MockLlm
from vllm_llm.text import TextTokenizer

OUTPUT = (
    "<think>The user wants the weather; I should call the tool.</think>"
    "Let me look that up.<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>'
    '<tool_call>\n{"name": "get_time", "arguments": {"zone": "Europe/Paris"}}\n</tool_call>'
)
TOOLS: Any = [  # typed Any: the openai client's TypedDicts are not what a test builds
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}},
        },
    },
]
MESSAGES: Any = [{"role": "user", "content": "Weather and time in Paris?"}]


class Routed:
    def __init__(self, mock: MockLlm, worker: RunningServer, router: RunningServer) -> None:
        self.mock = mock
        self.worker = worker
        self.router = router
        self.client = AsyncOpenAI(base_url=f"{router.base_url}/v1", api_key="unused", max_retries=0)
        self.worker_client = AsyncOpenAI(base_url=f"{worker.base_url}/v1", api_key="unused", max_retries=0)


@pytest_asyncio.fixture
async def routed(tiny_model_dir: Path) -> AsyncIterator[Routed]:
    """worker (MockLlm, no parsers) ← RemoteLlm ← router (hermes + deepseek_r1)."""
    async with open_parsing_cluster(tiny_model_dir) as cluster:
        cluster.mock.script = TextTokenizer.from_dir(tiny_model_dir).encode(OUTPUT, add_special_tokens=False)
        out = Routed(cluster.mock, cluster.worker, cluster.router)
        try:
            yield out
        finally:
            await out.client.close()
            await out.worker_client.close()


def _calls(calls: Any) -> list[tuple[str, dict[str, Any]]]:
    return [(c.function.name, json.loads(c.function.arguments)) for c in calls]


EXPECTED = [
    ("get_weather", {"city": "Paris", "unit": "c"}),
    ("get_time", {"zone": "Europe/Paris"}),
]


async def test_the_client_reads_tool_calls_and_reasoning_parsed_by_the_router(routed: Routed) -> None:
    response = await routed.client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        tools=TOOLS,
        max_tokens=200,
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    message = choice.message
    assert _calls(message.tool_calls) == EXPECTED
    assert all(c.id.startswith("chatcmpl-tool-") and c.type == "function" for c in message.tool_calls or [])
    assert message.content == "Let me look that up."
    assert (message.model_extra or {})["reasoning"] == "The user wants the weather; I should call the tool."
    assert response.usage is not None and response.usage.completion_tokens_details is not None
    script = list(routed.mock.script or ())
    tokenizer = TextTokenizer.from_dir(Path(routed.mock.info().tokenizer))
    think, end = (script.index(tokenizer.token_to_id(marker) or -1) for marker in ("<think>", "</think>"))
    assert response.usage.completion_tokens_details.reasoning_tokens == end - think - 1  # between the markers
    # the worker stayed token-level: token ids in, token ids out; auto choice over non-strict tools puts
    # no constraint on the output (vLLM 0.32 at --tool-strict-level auto)
    request = routed.mock.requests[-1]
    assert request.prompt_token_ids and request.sampling_params.structured_outputs is None


async def test_streamed_tool_call_deltas_assemble_to_the_same_calls(routed: Routed) -> None:
    stream = await routed.client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        tools=TOOLS,
        max_tokens=200,
        stream=True,
    )
    reasoning, content = "", ""
    calls: dict[int, dict[str, Any]] = {}
    finish: list[str] = []
    async for chunk in stream:
        for choice in chunk.choices:
            delta = choice.delta
            reasoning += (delta.model_extra or {}).get("reasoning") or ""
            content += delta.content or ""
            for call in delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                if call.id is not None:
                    assert entry["id"] is None, "an id is sent once, with the call's first delta"
                    entry["id"] = call.id
                    assert call.type == "function"
                if call.function is not None:
                    entry["name"] += call.function.name or ""
                    entry["arguments"] += call.function.arguments or ""
            if choice.finish_reason is not None:
                finish.append(choice.finish_reason)
    assert finish == ["tool_calls"]
    # vLLM's deepseek_r1 keeps the "<think>" text when the marker arrives in one delta with reasoning tokens
    # (deltas coalesce when the reader is slower than the engine); ours is equal to it (tests/llm/parsers)
    assert reasoning.removeprefix("<think>") == "The user wants the weather; I should call the tool."
    assert content == "Let me look that up."
    assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == EXPECTED
    assert all(str(c["id"]).startswith("chatcmpl-tool-") for c in calls.values())


async def test_a_streamed_stop_string_does_not_split_the_end_of_thinking(routed: Routed) -> None:
    """A stop string holds text back; the router's reasoning parser (keyed on token ids) still reads
    `</think>` whole, so the thinking and the content split where the marker is."""
    tokenizer = TextTokenizer.from_dir(Path(routed.mock.info().tokenizer))
    routed.mock.script = tokenizer.encode("<think>Short.</think>Hello world, bye.", add_special_tokens=False)
    stream = await routed.client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=50, stop=["world"], stream=True
    )
    reasoning, content, finish = "", "", []
    async for chunk in stream:
        for choice in chunk.choices:
            reasoning += (choice.delta.model_extra or {}).get("reasoning") or ""
            content += choice.delta.content or ""
            if choice.finish_reason is not None:
                finish.append((choice.finish_reason, (choice.model_extra or {}).get("stop_reason")))
    assert reasoning.removeprefix("<think>") == "Short."  # "<think>" kept when deltas coalesce (above)
    assert content == "Hello "
    assert finish == [("stop", "world")]
    whole = await routed.client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=50, stop=["world"]
    )
    assert (whole.choices[0].message.model_extra or {})["reasoning"] == "Short."
    assert whole.choices[0].message.content == "Hello "


async def test_include_reasoning_false_and_one_call_when_parallel_calls_are_off(routed: Routed) -> None:
    response = await routed.client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        tools=TOOLS,
        max_tokens=200,
        parallel_tool_calls=False,
        extra_body={"include_reasoning": False},
    )
    message = response.choices[0].message
    assert _calls(message.tool_calls) == EXPECTED[:1]
    assert (message.model_extra or {}).get("reasoning") is None


async def test_tool_choice_none_leaves_the_calls_in_the_content(routed: Routed) -> None:
    response = await routed.client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        tools=TOOLS,
        max_tokens=200,
        tool_choice="none",
    )
    choice = response.choices[0]
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    assert choice.message.content is not None and '"get_weather"' in choice.message.content


async def test_a_forced_tool_choice_is_constrained_over_the_wire(routed: Routed) -> None:
    """Hermes forces calls with a structural tag (vLLM 0.32's default strict tool calling): the router
    puts it in the request's structured outputs, which reach the worker."""
    named: Any = {"type": "function", "function": {"name": "get_weather"}}
    await routed.client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        tools=TOOLS,
        max_tokens=200,
        tool_choice=named,
    )
    sent = routed.mock.requests[-1].sampling_params.structured_outputs
    assert sent is not None and sent.structural_tag is not None
    assert "get_weather" in sent.structural_tag and "get_time" not in sent.structural_tag


async def test_without_parser_flags_tool_choices_are_refused_as_vllm_refuses_them(routed: Routed) -> None:
    """The worker has no parsers: vLLM's 400s, with vLLM's messages."""
    cases: list[tuple[Any, str]] = [
        ("required", 'tool_choice="required" requires --tool-call-parser to be set'),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            'tool_choice=function "get_weather" requires --tool-call-parser to be set',
        ),
        ("auto", '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
    ]
    for tool_choice, message in cases:
        with pytest.raises(BadRequestError) as refused:
            await routed.worker_client.chat.completions.create(
                model="tiny",
                messages=MESSAGES,
                tools=TOOLS,
                tool_choice=tool_choice,
                max_tokens=4,
            )
        assert refused.value.status_code == 400 and message in str(refused.value)
    # tools without a tool_choice mean "auto" (vLLM's check_tool_usage): refused the same way
    with pytest.raises(BadRequestError, match='"auto" tool choice requires'):
        await routed.worker_client.chat.completions.create(
            model="tiny",
            messages=MESSAGES,
            tools=TOOLS,
            max_tokens=4,
        )
