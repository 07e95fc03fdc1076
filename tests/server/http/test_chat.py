"""`POST /v1/chat/completions` over a MockLlm, through the official openai client."""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletionMessageParam

from tests.support.http_serving import MODEL, Served
from vllm_llm import ChatMessage, ChatRequest, ChatResult, MockLlm, TextSamplingParams

MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello."},
]


async def oracle(served: Served, messages: list[Any], **params: Any) -> ChatResult:
    """What the chat layer itself produces for the same conversation."""
    request = ChatRequest(
        request_id="oracle",
        messages=[ChatMessage(**m) for m in messages],
        params=TextSamplingParams(**params),
    )
    return await served.state.chat().complete(request)


async def test_chat_completion(mock_server: Served) -> None:
    resp = await mock_server.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=6)
    expected = await oracle(mock_server, list(MESSAGES), max_tokens=6)
    assert resp.id.startswith("chatcmpl-")
    assert resp.object == "chat.completion"
    assert resp.model == MODEL
    message = resp.choices[0].message
    assert (message.role, message.content) == ("assistant", expected.choices[0].content)
    assert resp.choices[0].finish_reason == "length"
    assert resp.usage is not None
    assert resp.usage.prompt_tokens == len(expected.prompt.prompt_token_ids)
    assert resp.usage.completion_tokens == 6


async def test_chat_streaming_with_usage(mock_server: Served) -> None:
    whole = await mock_server.client.chat.completions.create(model=MODEL, messages=MESSAGES, max_tokens=6)
    stream = await mock_server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=6, stream=True, stream_options={"include_usage": True}
    )
    chunks = [c async for c in stream]
    first, *deltas, last = chunks
    assert first.object == "chat.completion.chunk"
    assert first.choices[0].delta.role == "assistant" and first.choices[0].delta.content == ""
    assert "".join(c.choices[0].delta.content or "" for c in deltas) == whole.choices[0].message.content
    assert deltas[-1].choices[0].finish_reason == "length"
    assert last.choices == [] and last.usage is not None
    assert last.usage.model_dump() == whole.usage.model_dump()  # type: ignore[union-attr]


async def test_chat_n_choices(mock_server: Served) -> None:
    resp = await mock_server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=4, n=2, temperature=0.9
    )
    assert [c.index for c in resp.choices] == [0, 1]
    assert resp.usage is not None and resp.usage.completion_tokens == 8
    stream = await mock_server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=4, n=2, temperature=0.9, stream=True
    )
    texts = ["", ""]
    finishes: list[str | None] = [None, None]
    async for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.delta.content or ""
            finishes[choice.index] = choice.finish_reason or finishes[choice.index]
    assert texts == [c.message.content for c in resp.choices]
    assert finishes == ["length", "length"]


async def test_chat_logprobs(mock_server: Served) -> None:
    resp = await mock_server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_tokens=3, logprobs=True, top_logprobs=2
    )
    expected = await oracle(mock_server, list(MESSAGES), max_tokens=3, logprobs=2)
    positions = expected.choices[0].logprobs
    logprobs = resp.choices[0].logprobs
    assert positions is not None and logprobs is not None and logprobs.content is not None
    assert [c.token for c in logprobs.content] == [p.token for p in positions]
    assert [c.bytes for c in logprobs.content] == [list(p.token.encode()) for p in positions]
    assert [[t.token for t in c.top_logprobs] for c in logprobs.content] == [
        [c.token for c in p.candidates[:2]] for p in positions
    ]


async def test_chat_stop_and_max_completion_tokens(mock_server: Served) -> None:
    full = (await oracle(mock_server, list(MESSAGES), max_tokens=10)).choices[0].content
    assert full is not None
    stop = full[4:7]
    resp = await mock_server.client.chat.completions.create(
        model=MODEL, messages=MESSAGES, max_completion_tokens=10, stop=[stop]
    )
    assert resp.choices[0].message.content == full[: full.index(stop)]
    assert resp.choices[0].finish_reason == "stop"


async def test_roles_tools_and_template_options(mock_server: Served, mock_llm: MockLlm) -> None:
    messages: list[Any] = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get", "arguments": '{"city": "x"}'}}
            ],
        },
        {"role": "tool", "content": "sunny", "tool_call_id": "c1"},
        {"role": "assistant", "content": "It is"},
    ]
    tools: list[Any] = [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]
    resp = await mock_server.client.chat.completions.create(
        model=MODEL,
        messages=messages,
        tools=tools,
        tool_choice="none",  # tools without a tool_choice mean "auto", which needs a tool parser (as in vLLM)
        max_tokens=2,
        extra_body={
            "add_generation_prompt": False,
            "continue_final_message": True,
            "chat_template_kwargs": {},
        },
    )
    assert resp.choices[0].message.role == "assistant"
    tokenized = await mock_server.http.post(
        "/tokenize",
        json={
            "messages": messages,
            "tools": tools,
            "add_generation_prompt": False,
            "continue_final_message": True,
        },
    )
    assert mock_llm.requests[-1].prompt_token_ids == tokenized.json()["tokens"]
    prompt = mock_server.state.text().decode(tokenized.json()["tokens"])
    assert "get" in prompt and "sunny" in prompt and prompt.rstrip().endswith("It is")


async def test_chat_echo(mock_server: Served) -> None:
    messages: list[Any] = [*MESSAGES, {"role": "assistant", "content": "Hel"}]
    body: dict[str, Any] = {
        "messages": messages,
        "max_tokens": 2,
        "add_generation_prompt": False,
        "continue_final_message": True,
    }
    plain = await mock_server.http.post("/v1/chat/completions", json=body)
    echoed = await mock_server.http.post("/v1/chat/completions", json={**body, "echo": True})
    continuation = plain.json()["choices"][0]["message"]["content"]
    assert continuation  # two tokens were generated after the final message
    assert echoed.json()["choices"][0]["message"]["content"] == "Hel" + continuation
