"""Every field of vLLM 0.32's `ChatCompletionRequest` and `CompletionRequest`, one behavioural case each.

The test walks vLLM's own request models (imported from vllm) field by field: a field without a case
fails, so a vLLM upgrade that adds one fails here until it is honoured or refused. Each case shows that
ours honours the field (the engine request a MockLlm records, or the response, changes as vLLM's would)
or refuses it (a 4xx naming the field). Fields vLLM itself takes and ignores are asserted to change
nothing, with the vLLM source that shows it. A few honoured fields also run on the session's real
engine (`worker`).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import pytest_asyncio

from tests.support.http_serving import MODEL, Served, serve
from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer
from vllm_llm import MockLlm, ParserOptions, TextRequest, TextStream
from vllm_llm.wire import GenerateRequest, RepetitionDetection, StructuredOutputs
from vllm_server.config import FrontendConfig, ServerConfig
from vllm_server.errors import BadRequest
from vllm_server.http.openai import CompletionRequest
from vllm_server.wiring import build_state

#: A template that shows the variables a request can set (tools, documents, kwargs, reasoning effort).
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
    "{% if tools %}TOOLS:{{ tools | length }}\n{% endif %}"
    "{% if documents %}DOCS:{{ documents | length }}\n{% endif %}"
    "{% if reasoning_effort %}EFFORT:{{ reasoning_effort }}\n{% endif %}"
    "{% if flavour %}FLAVOUR:{{ flavour }}\n{% endif %}"
    "{% if add_generation_prompt %}<assistant>{% endif %}"
)
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "Say hello to the world"}]
PROMPT = "Hello there, a prompt of several tokens"
TOOLS = [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]


@contextlib.asynccontextmanager
async def mock_served(model_dir: Path, **server: Any) -> AsyncIterator[tuple[Served, MockLlm]]:
    """A server over a fresh tiny MockLlm with the test template and `server` settings."""
    llm = tiny_mock(model_dir, step_interval=0.0)
    # tool calls parsed with hermes, as the session worker and vLLM's server in tests/differential
    parsers = ParserOptions(enable_auto_tool_choice=True, tool_call_parser="hermes")
    config = ServerConfig(served_model_name=(MODEL,), chat_template=TEMPLATE, parsers=parsers, **server)
    state = build_state(FrontendConfig(server=config), llm)
    state.attach_layers()
    state.update_readiness()
    async with serve(state) as served:
        yield served, llm
    await llm.shutdown()


class Call(msgspec.Struct, kw_only=True):
    """One request's answer and the engine requests it made."""

    status: int
    body: Any
    raw: bytes
    requests: list[GenerateRequest]

    @property
    def request(self) -> GenerateRequest:
        """The one engine request."""
        assert len(self.requests) == 1, self.requests
        return self.requests[0]

    @property
    def sp(self) -> Any:
        """Its sampling parameters."""
        return self.request.sampling_params

    @property
    def text(self) -> str:
        """The first choice's text (chat content or completion text)."""
        choice = self.body["choices"][0]
        return str(choice["message"]["content"] if "message" in choice else choice["text"])


class Harness:
    """Requests to one endpoint of a mock server, with that endpoint's base body."""

    def __init__(self, served: Served, llm: MockLlm, endpoint: str) -> None:
        self.served, self.llm, self.endpoint = served, llm, endpoint
        self.chat = endpoint == "chat"

    @property
    def base(self) -> dict[str, Any]:
        """The base body: a short greedy request."""
        body: dict[str, Any] = {"model": MODEL, "max_tokens": 4, "temperature": 0}
        if self.chat:
            body["messages"] = MESSAGES
        else:
            body["prompt"] = PROMPT
        return body

    async def call(self, headers: dict[str, str] | None = None, **fields: Any) -> Call:
        """POST the base body with `fields` over it (a None value removes the field)."""
        body = {**self.base, **fields}
        body = {k: v for k, v in body.items() if v is not None}
        path = "/v1/chat/completions" if self.chat else "/v1/completions"
        seen = len(self.llm.requests)
        resp = await self.served.http.post(path, json=body, headers=headers)
        raw = resp.content
        parsed: Any = None
        if resp.headers.get("content-type", "").startswith("application/json"):
            parsed = resp.json()
        return Call(status=resp.status_code, body=parsed, raw=raw, requests=self.llm.requests[seen:])

    async def ok(self, headers: dict[str, str] | None = None, **fields: Any) -> Call:
        """A call that must succeed."""
        got = await self.call(headers, **fields)
        assert got.status == 200, got.raw
        return got

    async def refused(self, message: str, param: str | None, status: int = 400, **fields: Any) -> None:
        """A call that must be refused with `message` (a substring) naming `param`."""
        got = await self.call(**fields)
        assert got.status == status, got.raw
        error = got.body["error"]
        assert message in error["message"], error
        if param is not None:
            assert error["param"] == param, error
        assert got.requests == []

    def recording_text_requests(self) -> list[TextRequest]:
        """The text-layer requests from now on (the chat layer submits through the text layer)."""
        text = self.served.state.text()
        seen: list[TextRequest] = []
        generate = text.generate

        async def recording(request: TextRequest) -> TextStream:
            seen.append(request)
            return await generate(request)

        text.generate = recording  # type: ignore[method-assign]
        return seen

    def prompt_text(self, call: Call) -> str:
        """The engine prompt of `call`, decoded."""
        return self.served.state.text().decode(call.request.prompt_token_ids, skip_special_tokens=False)

    async def sp_changes(self, field: str, value: Any, attr: str, expected: Any, **extra: Any) -> None:
        """`field=value` sets the engine's `sampling_params.attr` to `expected`, unlike the base request."""
        base = await self.ok(**extra)
        assert getattr(base.sp, attr) != expected
        got = await self.ok(**{**extra, field: value})
        assert getattr(got.sp, attr) == expected

    async def request_changes(self, field: str, value: Any, attr: str, expected: Any) -> None:
        """`field=value` sets the engine request's `attr` to `expected`, unlike the base request."""
        base = await self.ok()
        assert getattr(base.request, attr) != expected
        got = await self.ok(**{field: value})
        assert getattr(got.request, attr) == expected

    async def ignored(self, field: str, value: Any) -> None:
        """`field=value` is taken and changes nothing the engine gets or the response says."""
        base = await self.ok()
        got = await self.ok(**{field: value})
        strip = {"request_id": "", "arrival_time": None}
        assert msgspec.structs.replace(got.request, **strip) == msgspec.structs.replace(base.request, **strip)
        assert got.text == base.text

    async def stop_string(self) -> tuple[str, str]:
        """A stop string the base output contains, and the output before it."""
        text = (await self.ok(max_tokens=8)).text
        stop = text[len(text) // 2 : len(text) // 2 + 2]
        assert stop.strip(), text
        return stop, text[: text.index(stop)]


Case = Callable[[Harness], Awaitable[None]]


def sp(field: str, value: Any, attr: str | None = None, expected: Any = None, **extra: Any) -> Case:
    """A case: the field reaches the engine's sampling parameters."""

    async def case(h: Harness) -> None:
        await h.sp_changes(field, value, attr or field, value if expected is None else expected, **extra)

    return case


def ignored(value: Any, *, where: str) -> Case:
    """A case: vLLM takes the field and ignores it (`where` is the vLLM source that shows it)."""
    assert where

    async def case(h: Harness) -> None:
        await h.ignored(case.field, value)  # type: ignore[attr-defined]

    return case


def refused(value: Any, message: str, param: str | None, status: int = 400, **extra: Any) -> Case:
    """A case: a non-default value is refused."""

    async def case(h: Harness) -> None:
        await h.refused(message, param, status, **{case.field: value, **extra})  # type: ignore[attr-defined]

    return case


# ---- cases shared by both endpoints ----------------------------------------------------------------


async def _model(h: Harness) -> None:
    await h.refused("does not exist", "model", 404, model="no-such-model")


async def _n(h: Harness) -> None:
    got = await h.ok(n=2, temperature=1.0)
    assert len(got.requests) == 2 and len(got.body["choices"]) == 2


async def _stop(h: Harness) -> None:
    stop, before = await h.stop_string()
    got = await h.ok(max_tokens=8, stop=[stop])
    assert got.text == before
    assert got.body["choices"][0]["stop_reason"] == stop


async def _include_stop_str_in_output(h: Harness) -> None:
    stop, before = await h.stop_string()
    got = await h.ok(max_tokens=8, stop=[stop], include_stop_str_in_output=True)
    assert got.text == before + stop


async def _stream(h: Harness) -> None:
    got = await h.ok(stream=True)
    assert got.raw.startswith(b"data: ") and got.raw.endswith(b"data: [DONE]\n\n")


async def _stream_options(h: Harness) -> None:
    plain = await h.ok(stream=True)
    got = await h.ok(stream=True, stream_options={"include_usage": True})
    assert b'"usage"' not in plain.raw
    last = json.loads(got.raw.split(b"data: ")[-2])
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 4


async def _response_format(h: Harness) -> None:
    await h.sp_changes(
        "response_format", {"type": "json_object"}, "structured_outputs", _so(json_object=True)
    )


async def _structured_outputs(h: Harness) -> None:
    await h.sp_changes("structured_outputs", {"regex": "a+"}, "structured_outputs", _so(regex="a+"))


def _so(**fields: Any) -> StructuredOutputs:
    return StructuredOutputs(**fields)


async def _use_beam_search(h: Harness) -> None:
    await h.refused("beam search is not supported by this server", "use_beam_search", use_beam_search=True)


async def _skip_special_tokens(h: Harness) -> None:
    h.llm.script = [1, 300]  # <s>, then an ordinary token
    try:
        skipped = await h.ok()
        kept = await h.ok(skip_special_tokens=False)
    finally:
        h.llm.script = None
    assert kept.text == "<s>" + skipped.text


async def _spaces_between_special_tokens(h: Harness) -> None:
    # The tiny tokenizer's decoder puts no space between special tokens either way, so the case shows
    # the field reaching the text layer's detokenizer (whose behaviour tests/llm/text/test_detokenizer.py
    # checks against vLLM's).
    seen = h.recording_text_requests()
    await h.ok(skip_special_tokens=False)
    await h.ok(skip_special_tokens=False, spaces_between_special_tokens=False)
    assert [r.params.spaces_between_special_tokens for r in seen] == [True, False]


async def _stop_token_ids(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(stop_token_ids=[7])
    assert 7 not in (base.sp.stop_token_ids or ()) and 7 in got.sp.stop_token_ids


async def _truncate_prompt_tokens(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(truncate_prompt_tokens=3)
    assert got.request.prompt_token_ids == base.request.prompt_token_ids[-3:]
    assert got.body["usage"]["prompt_tokens"] == 3
    await h.refused(
        "truncate_prompt_tokens=600 cannot be greater than max_model_len = 512. Please request a smaller "
        "truncation size.",
        "truncate_prompt_tokens",
        truncate_prompt_tokens=600,
    )


async def _truncation_side(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(truncate_prompt_tokens=3, truncation_side="right")
    assert got.request.prompt_token_ids == base.request.prompt_token_ids[:3]
    await h.refused("", "body.truncation_side", truncate_prompt_tokens=3, truncation_side="middle")


async def _logprob_token_ids(h: Harness) -> None:
    logprobs: Any = True if h.chat else 0
    await h.refused("`logprobs` must be set", "logprob_token_ids", logprob_token_ids=[5, 6])
    got = await h.ok(logprobs=logprobs, logprob_token_ids=[5, 6])
    assert (got.sp.logprob_token_ids, got.sp.logprobs) == ([5, 6], None)
    await h.refused("out-of-vocab", "logprob_token_ids", logprobs=logprobs, logprob_token_ids=[10**6])


async def _bad_words(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(bad_words=["hello"])
    assert base.sp.bad_words_token_ids is None and got.sp.bad_words_token_ids


async def _priority(h: Harness) -> None:
    await h.request_changes("priority", 3, "priority", 3)


async def _request_id(h: Harness) -> None:
    got = await h.ok(request_id="given-id")
    prefix = "chatcmpl-" if h.chat else "cmpl-"
    assert got.body["id"] == prefix + "given-id"
    assert got.request.request_id.startswith(prefix + "given-id")


async def _session_id(h: Harness) -> None:
    await h.request_changes("session_id", "s-1", "session_id", "s-1")
    by_header = await h.ok(headers={"X-Session-ID": "s-2"})
    assert by_header.request.session_id == "s-2"
    by_xargs = await h.ok(vllm_xargs={"session_id": "s-3"})
    assert by_xargs.request.session_id == "s-3"


async def _return_tokens_as_token_ids(h: Harness) -> None:
    logprobs: dict[str, Any] = {"logprobs": True, "top_logprobs": 1} if h.chat else {"logprobs": 1}
    base = await h.ok(**logprobs)
    got = await h.ok(return_tokens_as_token_ids=True, **logprobs)
    lp = got.body["choices"][0]["logprobs"]
    tokens = [c["token"] for c in lp["content"]] if h.chat else lp["tokens"]
    ids = (
        got.body["choices"][0].get("token_ids")
        or (await h.ok(return_token_ids=True)).body["choices"][0]["token_ids"]
    )
    assert tokens == [f"token_id:{t}" for t in ids]
    assert base.body["choices"][0]["logprobs"] != lp


async def _return_token_ids(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(return_token_ids=True)
    assert base.body["choices"][0]["token_ids"] is None
    assert len(got.body["choices"][0]["token_ids"]) == 4
    prompt_ids = got.body["prompt_token_ids"] if h.chat else got.body["choices"][0]["prompt_token_ids"]
    assert prompt_ids == got.request.prompt_token_ids


async def _routed_experts_prompt_start(h: Harness) -> None:
    await h.ignored("routed_experts_prompt_start", 2)
    await h.refused(
        "Input should be greater than or equal to 0",
        "body.routed_experts_prompt_start",
        routed_experts_prompt_start=-1,
    )


async def _mm_payload(h: Harness) -> None:
    await h.ignored("mm_payload", "none")
    await h.refused("", "body.mm_payload", mm_payload="bytes")


async def _ec_transfer_params(h: Harness) -> None:
    await h.request_changes("ec_transfer_params", {"x": 1}, "ec_transfer_params", {"x": 1})


async def _kv_transfer_params(h: Harness) -> None:
    await h.request_changes("kv_transfer_params", {"x": 1}, "kv_transfer_params", {"x": 1})


async def _cache_salt(h: Harness) -> None:
    await h.request_changes("cache_salt", "salty", "cache_salt", "salty")


async def _max_tokens(h: Harness) -> None:
    await h.sp_changes("max_tokens", 3, "max_tokens", 3)


async def _thinking_token_budget(h: Harness) -> None:
    await h.refused(
        "thinking_token_budget is set but reasoning_config is not configured", None, thinking_token_budget=5
    )


SHARED: dict[str, Case] = {
    "model": _model,
    "frequency_penalty": sp("frequency_penalty", 0.5),
    "presence_penalty": sp("presence_penalty", 0.5),
    "repetition_penalty": sp("repetition_penalty", 1.2),
    "temperature": sp("temperature", 0.7),
    "top_p": sp("top_p", 0.5, temperature=1.0),
    "top_k": sp("top_k", 5, temperature=1.0),
    "min_p": sp("min_p", 0.1, temperature=1.0),
    "seed": sp("seed", 7),
    "logit_bias": sp("logit_bias", {"5": 1.5}, expected={5: 1.5}),
    "max_tokens": _max_tokens,
    "n": _n,
    "stop": _stop,
    "stream": _stream,
    "stream_options": _stream_options,
    "response_format": _response_format,
    "structured_outputs": _structured_outputs,
    "user": ignored("someone", where="chat_completion/protocol.py: `# NOTE this will be ignored by vLLM`"),
    "use_beam_search": _use_beam_search,
    "watermarking": ignored(
        True, where="config/vllm.py _check_supports_watermarking: no watermark_config -> False (a warning)"
    ),
    "length_penalty": ignored(
        2.0, where="chat_completion/protocol.py: read only by to_beam_search_params, not to_sampling_params"
    ),
    "stop_token_ids": _stop_token_ids,
    "include_stop_str_in_output": _include_stop_str_in_output,
    "ignore_eos": sp("ignore_eos", True),
    "min_tokens": sp("min_tokens", 2),
    "skip_special_tokens": _skip_special_tokens,
    "spaces_between_special_tokens": _spaces_between_special_tokens,
    "truncate_prompt_tokens": _truncate_prompt_tokens,
    "truncation_side": _truncation_side,
    "prompt_logprobs": sp("prompt_logprobs", 1),
    "logprob_token_ids": _logprob_token_ids,
    "allowed_token_ids": sp("allowed_token_ids", [5, 6]),
    "bad_words": _bad_words,
    "priority": _priority,
    "request_id": _request_id,
    "session_id": _session_id,
    "return_tokens_as_token_ids": _return_tokens_as_token_ids,
    "return_token_ids": _return_token_ids,
    "routed_experts_prompt_start": _routed_experts_prompt_start,
    "return_token_offsets": ignored(
        True, where="protocol.py return_token_offsets: 'ignored on regular generation endpoints'"
    ),
    "mm_payload": _mm_payload,
    "return_mm_kwargs": ignored(
        False,
        where="protocol.py return_mm_kwargs: alias of mm_payload, 'Ignored on regular generation endpoints'",
    ),
    "cache_salt": _cache_salt,
    "kv_transfer_params": _kv_transfer_params,
    "ec_transfer_params": _ec_transfer_params,
    "vllm_xargs": sp("vllm_xargs", {"k": 1}, "extra_args"),
    "repetition_detection": sp(
        "repetition_detection",
        {"max_pattern_size": 4, "min_pattern_size": 1, "min_count": 3},
        expected=RepetitionDetection(max_pattern_size=4, min_pattern_size=1, min_count=3),
    ),
    "stream_interval": sp("stream_interval", 2),
    "thinking_token_budget": _thinking_token_budget,
}


# ---- chat only --------------------------------------------------------------------------------------


async def _messages(h: Harness) -> None:
    got = await h.ok(messages=[{"role": "user", "content": "a different question"}])
    assert "<user>a different question" in h.prompt_text(got)


async def _logprobs_chat(h: Harness) -> None:
    await h.sp_changes("logprobs", True, "logprobs", 0)


async def _top_logprobs(h: Harness) -> None:
    await h.sp_changes("top_logprobs", 3, "logprobs", 3, logprobs=True)
    await h.refused("`logprobs` must be set to true", "top_logprobs", top_logprobs=3)


async def _max_completion_tokens(h: Harness) -> None:
    await h.sp_changes("max_completion_tokens", 2, "max_tokens", 2)


async def _tools(h: Harness) -> None:
    got = await h.ok(tools=TOOLS, tool_choice="none")
    assert "TOOLS:1" in h.prompt_text(got)


async def _tool_choice(h: Harness) -> None:
    got = await h.ok(tools=TOOLS, tool_choice="required")
    assert got.sp.structured_outputs is not None  # the hermes tool-call constraint
    auto = await h.ok(tools=TOOLS)  # absent: "auto" with tools, no constraint
    assert auto.sp.structured_outputs is None
    await h.refused("When using `tool_choice`, `tools` must be set.", "tool_choice", tool_choice="required")


async def _parallel_tool_calls(h: Harness) -> None:
    many = await h.ok(tools=TOOLS, tool_choice="required")
    one = await h.ok(tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
    assert many.sp.structured_outputs != one.sp.structured_outputs


async def _reasoning_effort(h: Harness) -> None:
    got = await h.ok(reasoning_effort="low")
    assert "EFFORT:low" in h.prompt_text(got)


async def _include_reasoning(h: Harness) -> None:
    await h.request_changes("include_reasoning", False, "reasoning_ended", True)


async def _echo_chat(h: Harness) -> None:
    messages = [*MESSAGES, {"role": "assistant", "content": "Well"}]
    base = await h.ok(messages=messages, add_generation_prompt=False)
    got = await h.ok(messages=messages, add_generation_prompt=False, echo=True)
    assert got.text == "Well" + base.text


async def _add_generation_prompt(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(add_generation_prompt=False)
    assert h.prompt_text(base).endswith("<assistant>") and not h.prompt_text(got).endswith("<assistant>")


async def _continue_final_message(h: Harness) -> None:
    messages = [*MESSAGES, {"role": "assistant", "content": "Well"}]
    base = await h.ok(messages=messages, add_generation_prompt=False)
    got = await h.ok(messages=messages, add_generation_prompt=False, continue_final_message=True)
    assert h.prompt_text(base).endswith("Well\n") and h.prompt_text(got).endswith("Well")


async def _add_special_tokens_chat(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(add_special_tokens=True)
    assert got.request.prompt_token_ids == [1, *base.request.prompt_token_ids]


async def _documents(h: Harness) -> None:
    got = await h.ok(documents=[{"title": "t", "text": "x"}])
    assert "DOCS:1" in h.prompt_text(got)


UNTRUSTED = (
    "Chat template is passed with request, but --trust-request-chat-template is not set. "
    "Refused request with untrusted chat template."
)


async def _chat_template(h: Harness) -> None:
    """Refused without --trust-request-chat-template (test_trusted_chat_template_is_rendered: with it),
    as vLLM's validate_chat_template: a 400 naming no param, a template in the kwargs too."""
    for fields in ({"chat_template": "{{ 1 }}"}, {"chat_template_kwargs": {"chat_template": "{{ 1 }}"}}):
        got = await h.call(**fields)
        assert got.status == 400 and got.requests == [], got.raw
        assert got.body["error"]["message"] == UNTRUSTED and got.body["error"]["param"] is None
    await h.ok(chat_template_kwargs={"chat_template": None})  # vLLM's check: a template that is not None


async def _chat_template_kwargs(h: Harness) -> None:
    got = await h.ok(chat_template_kwargs={"flavour": "mint"})
    assert "FLAVOUR:mint" in h.prompt_text(got)


async def _mm_processor_kwargs(h: Harness) -> None:
    await h.refused(
        "Per-request mm_processor_kwargs are disabled by default",
        "mm_processor_kwargs",
        mm_processor_kwargs={"a": 1},
    )


async def _media_io_kwargs(h: Harness) -> None:
    await h.refused(
        "Per-request media_io_kwargs are disabled by default",
        "media_io_kwargs",
        media_io_kwargs={"image": {"image_mode": "L"}},
    )


async def _return_prompt_text(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(return_prompt_text=True)
    assert base.body["prompt_text"] is None
    # the rendered template (bos included as text), which tokenizes to the engine's prompt
    assert got.body["prompt_text"] == h.prompt_text(got)


CHAT: dict[str, Case] = {
    **SHARED,
    "messages": _messages,
    "logprobs": _logprobs_chat,
    "top_logprobs": _top_logprobs,
    "max_completion_tokens": _max_completion_tokens,
    "tools": _tools,
    "tool_choice": _tool_choice,
    "parallel_tool_calls": _parallel_tool_calls,
    "reasoning_effort": _reasoning_effort,
    "include_reasoning": _include_reasoning,
    "echo": _echo_chat,
    "add_generation_prompt": _add_generation_prompt,
    "continue_final_message": _continue_final_message,
    "add_special_tokens": _add_special_tokens_chat,
    "documents": _documents,
    "chat_template": _chat_template,
    "chat_template_kwargs": _chat_template_kwargs,
    "media_io_kwargs": _media_io_kwargs,
    "mm_processor_kwargs": _mm_processor_kwargs,
    "return_prompt_text": _return_prompt_text,
}


# ---- completions only -------------------------------------------------------------------------------


async def _prompt(h: Harness) -> None:
    got = await h.ok(prompt="another prompt")
    assert h.prompt_text(got) == "<s>another prompt"


async def _echo_completion(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(echo=True)
    assert got.text == PROMPT + base.text


async def _logprobs_completion(h: Harness) -> None:
    await h.sp_changes("logprobs", 2, "logprobs", 2)


async def _suffix(h: Harness) -> None:
    await h.refused("suffix is not supported", "suffix", suffix="tail")


async def _prompt_embeds(h: Harness) -> None:
    await h.refused("prompt_embeds is not supported by this server", "prompt_embeds", prompt_embeds="AAAA")
    await h.refused("Echo is unsupported with prompt embeds.", None, prompt_embeds="AAAA", echo=True)


async def _add_special_tokens_completion(h: Harness) -> None:
    base = await h.ok()
    got = await h.ok(add_special_tokens=False)
    assert [1, *got.request.prompt_token_ids] == base.request.prompt_token_ids


COMPLETION: dict[str, Case] = {
    **SHARED,
    "prompt": _prompt,
    "echo": _echo_completion,
    "logprobs": _logprobs_completion,
    "suffix": _suffix,
    "prompt_embeds": _prompt_embeds,
    "add_special_tokens": _add_special_tokens_completion,
}

for _table in (CHAT, COMPLETION):
    for _name, _case in _table.items():
        if not hasattr(_case, "field"):
            _case.field = _name  # type: ignore[attr-defined]


def _vllm_fields(endpoint: str) -> list[str]:
    if endpoint == "chat":
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

        return list(ChatCompletionRequest.model_fields)
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest

    return list(CompletionRequest.model_fields)


CHAT_FIELDS = _vllm_fields("chat")
COMPLETION_FIELDS = _vllm_fields("completion")


@pytest_asyncio.fixture
async def mock(tiny_model_dir: Path) -> AsyncIterator[tuple[Served, MockLlm]]:
    async with mock_served(tiny_model_dir) as got:
        yield got


def test_vllm_models_are_the_ones_the_cases_cover() -> None:
    assert len(CHAT_FIELDS) == 68 and len(COMPLETION_FIELDS) == 55
    assert set(CHAT) >= set(CHAT_FIELDS) and set(COMPLETION) >= set(COMPLETION_FIELDS)


@pytest.mark.parametrize("field", CHAT_FIELDS)
async def test_chat_field(field: str, mock: tuple[Served, MockLlm]) -> None:
    case = CHAT.get(field)
    assert case is not None, f"vLLM's ChatCompletionRequest has `{field}`, which no case covers"
    await case(Harness(*mock, "chat"))


@pytest.mark.parametrize("field", COMPLETION_FIELDS)
async def test_completion_field(field: str, mock: tuple[Served, MockLlm]) -> None:
    case = COMPLETION.get(field)
    assert case is not None, f"vLLM's CompletionRequest has `{field}`, which no case covers"
    await case(Harness(*mock, "completion"))


# ---- the trust flag ---------------------------------------------------------------------------------


async def test_trusted_mm_kwargs_are_taken(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, trust_request_mm_kwargs=True) as (served, llm):
        h = Harness(served, llm, "chat")
        await h.ok(mm_processor_kwargs={"a": 1}, media_io_kwargs={"image": {"image_mode": "L"}})


async def test_trusted_chat_template_is_rendered(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, trust_request_chat_template=True) as (served, llm):
        h = Harness(served, llm, "chat")
        got = await h.ok(chat_template="OWN:{{ messages | length }}")
        assert h.prompt_text(got) == "OWN:2"
        # accepted; rendered with the server's --chat-template, which vLLM passes over the kwargs' one
        got = await h.ok(chat_template_kwargs={"chat_template": "KWARGS:{{ messages | length }}"})
        assert h.prompt_text(got).startswith("<s><system>be brief")


async def test_default_chat_template_kwargs_under_the_requests(tiny_model_dir: Path) -> None:
    async with mock_served(tiny_model_dir, default_chat_template_kwargs={"flavour": "mint"}) as (served, llm):
        h = Harness(served, llm, "chat")
        assert "FLAVOUR:mint" in h.prompt_text(await h.ok())
        assert "FLAVOUR:lime" in h.prompt_text(await h.ok(chat_template_kwargs={"flavour": "lime"}))
        assert "FLAVOUR:mint" in h.prompt_text(await h.ok(chat_template_kwargs={"flavour": "auto"}))


@pytest.mark.parametrize("exclude", [False, True])
async def test_tools_excluded_when_tool_choice_is_none(exclude: bool, tiny_model_dir: Path) -> None:
    server = {"exclude_tools_when_tool_choice_none": exclude}
    async with mock_served(tiny_model_dir, **server) as (served, llm):
        h = Harness(served, llm, "chat")
        assert ("TOOLS:1" in h.prompt_text(await h.ok(tools=TOOLS, tool_choice="none"))) != exclude
        assert "TOOLS:1" in h.prompt_text(await h.ok(tools=TOOLS, tool_choice="auto"))


# ---- on the real engine -----------------------------------------------------------------------------


async def test_logprob_token_ids_on_the_engine(worker: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        resp = await http.post(
            "/v1/completions",
            json={
                "model": MODEL,
                "prompt": PROMPT,
                "max_tokens": 3,
                "temperature": 0,
                "logprobs": 0,
                "logprob_token_ids": [5, 6],
                "return_token_ids": True,
                "return_tokens_as_token_ids": True,
            },
        )
        assert resp.status_code == 200, resp.text
        choice = resp.json()["choices"][0]
        for token_id, top in zip(choice["token_ids"], choice["logprobs"]["top_logprobs"], strict=True):
            assert set(top) == {f"token_id:{token_id}", "token_id:5", "token_id:6"}
        resp = await http.post(
            "/v1/chat/completions",
            json={
                "model": MODEL,
                "messages": MESSAGES,
                "max_tokens": 2,
                "temperature": 0,
                "logprobs": True,
                "logprob_token_ids": [5, 6],
            },
        )
        assert resp.status_code == 200, resp.text
        for entry in resp.json()["choices"][0]["logprobs"]["content"]:
            assert len(entry["top_logprobs"]) in (2, 3)


async def test_truncate_prompt_tokens_on_the_engine(worker: RunningServer) -> None:
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        whole = await http.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": PROMPT, "max_tokens": 2, "return_token_ids": True},
        )
        cut = await http.post(
            "/v1/completions",
            json={
                "model": MODEL,
                "prompt": PROMPT,
                "max_tokens": 2,
                "truncate_prompt_tokens": 3,
                "return_token_ids": True,
            },
        )
        assert cut.status_code == 200, cut.text
        assert cut.json()["usage"]["prompt_tokens"] == 3
        assert (
            cut.json()["choices"][0]["prompt_token_ids"]
            == whole.json()["choices"][0]["prompt_token_ids"][-3:]
        )


async def test_prompt_embeds_on_an_engine_with_them(worker: RunningServer) -> None:
    # The session engine takes prompt embeddings (vLLM would decode and run them); this server does not
    # decode tensors, so it refuses them as unsupported rather than dropping them beside the prompt.
    async with httpx.AsyncClient(base_url=worker.base_url, timeout=120) as http:
        resp = await http.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": PROMPT, "max_tokens": 2, "prompt_embeds": "AAAA"},
        )
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert (error["message"], error["param"]) == (
        "prompt_embeds is not supported by this server",
        "prompt_embeds",
    )


def test_prompt_embeds_on_an_engine_without_them() -> None:
    # A server owning an engine started without them answers with vLLM's message (embed_utils.py).
    body = msgspec.json.decode(b'{"prompt": "x", "prompt_embeds": "AAAA"}', type=CompletionRequest)
    with pytest.raises(BadRequest) as caught:
        body.check(512, prompt_embeds_enabled=False)
    assert (caught.value.message, caught.value.param) == (
        "You must set `--enable-prompt-embeds` to input `prompt_embeds`.",
        "prompt_embeds",
    )
