"""vLLM's chat-template flags on a `vllm-frontend serve` process (the mock, a template that shows its
variables), through the official `openai` and `anthropic` clients: --trust-request-chat-template (a
request's own template refused without it, with vLLM's 400 and message, on every route vLLM checks it),
--default-chat-template-kwargs (under the request's) and --exclude-tools-when-tool-choice-none. The merge
itself is compared with vLLM's in tests/llm/text/test_chat.py; the refusal with vLLM's own server in
tests/differential/test_chat_templates.py."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import Frontend

MOCK = ("--mock", "--grpc-port", "-1", "--served-model-name", "tiny")
#: Shows the tools and the kwargs the template gets.
TEMPLATE = (
    "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
    "{% if tools %}TOOLS:{{ tools | length }}\n{% endif %}"
    "{% if flavour %}FLAVOUR:{{ flavour }}\n{% endif %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
UNTRUSTED = (
    "Chat template is passed with request, but --trust-request-chat-template is not set. "
    "Refused request with untrusted chat template."
)
HI: Any = [{"role": "user", "content": "Say hello"}]
TOOLS: Any = [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]
RESPONSES_TOOLS: Any = [{"type": "function", "name": "get", "parameters": {"type": "object"}}]
ANTHROPIC_TOOLS: Any = [{"name": "get", "input_schema": {"type": "object"}}]


class Clients:
    def __init__(self, front: Frontend) -> None:
        self.openai = openai.AsyncOpenAI(base_url=f"{front.base_url}/v1", api_key="x", max_retries=0)
        self.anthropic = anthropic.AsyncAnthropic(base_url=front.base_url, api_key="x", max_retries=0)
        self.http = httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE)

    async def prompt(self, **extra: Any) -> str:
        """The prompt text a chat completion rendered (vLLM's `return_prompt_text`)."""
        done = await self.openai.chat.completions.create(
            model="tiny", messages=HI, max_tokens=1, extra_body={"return_prompt_text": True, **extra}
        )
        return str((done.model_extra or {})["prompt_text"])

    async def tokenized(self, **extra: Any) -> httpx.Response:
        return await self.http.post("/tokenize", json={"model": "tiny", "messages": HI, **extra})

    async def responses_tokens(self, **extra: Any) -> int:
        done = await self.openai.responses.create(
            model="tiny", input="Say hello", max_output_tokens=1, **extra
        )
        assert done.usage is not None
        return int(done.usage.input_tokens)

    async def anthropic_tokens(self, **extra: Any) -> int:
        counted = await self.anthropic.messages.count_tokens(model="tiny", messages=HI, **extra)
        return int(counted.input_tokens)


@asynccontextmanager
async def served(tmp_path: Path, *flags: str) -> AsyncIterator[Clients]:
    template = tmp_path / "template.jinja"
    template.write_text(TEMPLATE, encoding="utf-8")
    front = await Frontend.start(*MOCK, "--chat-template", str(template), *flags)
    clients = Clients(front)
    try:
        yield clients
    finally:
        await clients.openai.close()
        await clients.anthropic.close()
        await clients.http.aclose()
        await front.stop(10)


OWN = "OWN:{{ messages | length }}"


async def test_without_the_flags(tmp_path: Path) -> None:
    async with served(tmp_path) as c:
        # a request's own template: refused wherever vLLM checks it, with vLLM's status and message
        for extra in ({"chat_template": OWN}, {"chat_template_kwargs": {"chat_template": OWN}}):
            with pytest.raises(openai.BadRequestError) as refused:
                await c.prompt(**extra)
            assert refused.value.status_code == 400
            assert refused.value.body == {
                "message": UNTRUSTED,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
            got = await c.tokenized(**extra)
            assert got.status_code == 400 and got.json()["error"]["message"] == UNTRUSTED, got.text
        with pytest.raises(openai.BadRequestError) as refused:
            await c.responses_tokens(extra_body={"chat_template_kwargs": {"chat_template": OWN}})
        assert refused.value.status_code == 400 and UNTRUSTED in str(refused.value)
        with pytest.raises(anthropic.BadRequestError) as denied:
            await c.anthropic_tokens(extra_body={"chat_template_kwargs": {"chat_template": OWN}})
        assert denied.value.status_code == 400 and UNTRUSTED in str(denied.value)
        with pytest.raises(anthropic.BadRequestError):
            await c.anthropic.messages.create(
                model="tiny",
                messages=HI,
                max_tokens=1,
                extra_body={"chat_template_kwargs": {"chat_template": OWN}},
            )
        # no defaults; the tools rendered whatever the tool_choice
        assert "FLAVOUR" not in await c.prompt()
        assert "TOOLS:1" in await c.prompt(tools=TOOLS, tool_choice="none")
        tools = {"tools": RESPONSES_TOOLS, "tool_choice": "none"}
        assert await c.responses_tokens(**tools) > await c.responses_tokens()
        none: Any = {"type": "none"}
        assert await c.anthropic_tokens(tools=ANTHROPIC_TOOLS, tool_choice=none) > await c.anthropic_tokens()


async def test_with_the_flags(tmp_path: Path) -> None:
    flags = ("--trust-request-chat-template", "--exclude-tools-when-tool-choice-none")
    kwargs = ("--default-chat-template-kwargs", json.dumps({"flavour": "mint"}))
    async with served(tmp_path, *flags, *kwargs) as c:
        # the request's template is rendered
        assert await c.prompt(chat_template=OWN) == "OWN:1"
        tokenized = await c.tokenized(chat_template=OWN)
        assert tokenized.status_code == 200, tokenized.text
        text = await c.http.post("/detokenize", json={"model": "tiny", "tokens": tokenized.json()["tokens"]})
        assert text.json()["prompt"] == "OWN:1"
        await c.responses_tokens(extra_body={"chat_template_kwargs": {"chat_template": OWN}})
        await c.anthropic_tokens(extra_body={"chat_template_kwargs": {"chat_template": OWN}})
        # the server's kwargs under the request's
        assert "FLAVOUR:mint" in await c.prompt()
        assert "FLAVOUR:lime" in await c.prompt(chat_template_kwargs={"flavour": "lime"})
        assert "FLAVOUR:mint" in await c.prompt(chat_template_kwargs={"flavour": None})
        # tool_choice "none": no tools for the template (chat, Responses, Anthropic); /tokenize keeps them
        assert "TOOLS" not in await c.prompt(tools=TOOLS, tool_choice="none")
        tools = {"tools": RESPONSES_TOOLS, "tool_choice": "none"}
        assert await c.responses_tokens(**tools) == await c.responses_tokens()
        none: Any = {"type": "none"}
        assert await c.anthropic_tokens(tools=ANTHROPIC_TOOLS, tool_choice=none) == await c.anthropic_tokens()
        with_tools = (await c.tokenized(tools=TOOLS)).json()["count"]
        assert with_tools > (await c.tokenized()).json()["count"]
