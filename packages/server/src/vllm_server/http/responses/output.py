"""The output of `POST /v1/responses`: one `response` object, or its SSE events, as vLLM 0.32's.

Streamed: `response.created` and `response.in_progress` (the response in progress, no output), the item
events of `EventProcessor`, then `response.completed` with the whole response; each event numbered by
`sequence_number` from 0 and framed as `event: <type>` + `data: <json>`. Whole: the reply parsed at its end
(reasoning, message, function calls, in that order, each only when present).

`status` is "incomplete" (with `incomplete_details.reason` "max_output_tokens") when the output hit its
token limit, else "completed"; the sampling values shown are the ones the engine ran with (defaults and
greedy resets applied, as vLLM shows its SamplingParams).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from vllm_llm import ChatChoice, ChatStream, TextUsage
from vllm_llm.wire import GenerationDefaults, LlmInfo
from vllm_server.errors import error_body, map_error
from vllm_server.http.openai.choices import collect_choices
from vllm_server.http.openai.codec import encode
from vllm_server.http.openai.sse import close_shielded
from vllm_server.http.responses.events import Event, EventProcessor
from vllm_server.http.responses.objects import (
    call_id,
    function_call_item,
    item_id,
    message_item,
    reasoning_item,
    text_part,
    usage_json,
)
from vllm_server.http.responses.request import ResponsesRequest
from vllm_server.http.responses.tools import FunctionTool
from vllm_server.metrics import RequestMetrics
from vllm_server.request_checks import check_finish
from vllm_server.request_log import OutputLog

__all__ = ["ResponsesOutput"]

_SAMPLING_EPS = 1e-5
_MAX_TEMP = 1e-2


class ResponsesOutput:
    """The response of one Responses request over its started chat stream."""

    def __init__(
        self,
        body: ResponsesRequest,
        stream: ChatStream,
        *,
        request_id: str,
        model: str,
        info: LlmInfo,
        tools: list[FunctionTool],
        tool_choice: str | dict[str, Any],
        metrics: RequestMetrics,
        output_log: OutputLog | None = None,
    ) -> None:
        self.body = body
        self.output_log = output_log
        self.stream = stream
        self.request_id = request_id
        self.model = model
        self.tools = tools
        self.tool_choice = tool_choice
        self.metrics = metrics
        self.created = int(time.time())
        self.prompt_tokens = len(stream.prompt.prompt_token_ids)
        self._sampling = _shown_sampling(body, info, self.prompt_tokens)

    # ---- whole ---------------------------------------------------------------------------------------

    async def response(self) -> dict[str, Any]:
        """Read the stream to its end, parse the reply whole and build the `response` object."""
        self.stream.parse_deltas = False
        got = await collect_choices(self.stream, 1, self.metrics, lambda d: d.text)
        log = got.logs[0]
        choice = self.stream.parse_choice(
            0, log.text, log.token_ids, None, log.finish_reason, log.stop_reason
        )
        if self.output_log is not None:
            self.output_log.log(self.request_id, log.text, log.token_ids, log.finish_reason)
        reasoning = choice.reasoning_tokens if self.stream.counts_reasoning_tokens else 0
        written = _written(got.usage)
        usage = usage_json(
            self.prompt_tokens, got.completion_tokens, got.cached_tokens, reasoning, written=written
        )
        out = self._response(self._items(choice), _status(log.finish_reason), usage)
        out["kv_transfer_params"] = got.kv_transfer_params
        return out

    def _items(self, c: ChatChoice) -> list[dict[str, Any]]:
        """vLLM's build_response_output_items (or its single message when nothing parses)."""
        if not self.stream.parsing:
            parts = [text_part(c.content, None)] if c.content else []
            return [message_item(item_id("msg"), parts, "completed")]
        items: list[dict[str, Any]] = []
        if c.reasoning and self.body.include_reasoning:
            items.append(reasoning_item(item_id("rs"), c.reasoning, None))
        if c.content:
            items.append(message_item(item_id("msg"), [text_part(c.content, None)], "completed"))
        for call in c.tool_calls:
            arguments = call.function.arguments
            assert isinstance(arguments, str)
            items.append(
                function_call_item(
                    item_id("fc"), call.id or call_id(), call.function.name, arguments, "completed"
                )
            )
        return items

    # ---- streaming -----------------------------------------------------------------------------------

    async def frames(self) -> AsyncIterator[bytes]:
        """The SSE events, numbered; an error after the start becomes an `error` event."""
        sequence = 0

        def frame(event: Event) -> bytes:
            nonlocal sequence
            event["sequence_number"] = sequence
            sequence += 1
            kind: str = event["type"]
            return b"event: " + kind.encode() + b"\ndata: " + encode(event) + b"\n\n"

        reason: str | None = None
        try:
            opening = self._response([], "in_progress", None)
            yield frame({"response": opening, "type": "response.created"})
            yield frame({"response": opening, "type": "response.in_progress"})
            try:
                async for event in self._events():
                    yield frame(event)
            except Exception as exc:
                mapping = map_error(exc)
                error = error_body(mapping)["error"]
                yield frame({**error, "type": "error"})  # type: ignore[dict-item]
                return
            reason = "done"
        finally:
            await close_shielded(self.stream)
            if reason is None:
                self.metrics.finish(None)

    async def _events(self) -> AsyncIterator[Event]:
        processor = EventProcessor()
        produced = 0
        cached = written = 0
        token_ids: list[int] = []
        text = ""
        last: str | None = None
        async for d in self.stream:
            check_finish(d.finish_reason)
            self.metrics.tokens(len(d.token_ids))
            produced += len(d.token_ids)
            token_ids.extend(d.token_ids)
            text += d.text
            last = d.finish_reason or last
            if d.usage is not None:
                cached, written = d.usage.cached_tokens, _written(d.usage)
            for event in processor.feed(d):
                yield event
        for event in processor.close():
            yield event
        self.metrics.finish(last)
        if self.output_log is not None:
            self.output_log.log(self.request_id, text, token_ids, last, streaming=True)
        counts = self.stream.counts_reasoning_tokens
        reasoning = self.stream.count_reasoning_tokens(token_ids) if counts else 0
        usage = usage_json(self.prompt_tokens, produced, cached, reasoning, written=written)
        final = self._response(processor.output, _status(last), usage)
        yield {"response": final, "type": "response.completed"}

    # ---- the response object ---------------------------------------------------------------------------

    def _response(
        self, output: list[dict[str, Any]], status: str, usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        """vLLM's ResponsesResponse.from_request."""
        body = self.body
        sampling = self._sampling
        incomplete = {"reason": "max_output_tokens"} if status == "incomplete" else None
        return {
            "id": self.request_id,
            "created_at": self.created,
            "incomplete_details": incomplete,
            "instructions": body.instructions,
            "metadata": body.metadata,
            "model": self.model,
            "object": "response",
            "output": output,
            "parallel_tool_calls": body.parallel_tool_calls if body.parallel_tool_calls is not None else True,
            "temperature": sampling["temperature"],
            "tool_choice": self.tool_choice,
            "tools": [t.echo for t in self.tools],
            "top_p": sampling["top_p"],
            "background": bool(body.background),
            "max_output_tokens": sampling["max_tokens"],
            "max_tool_calls": body.max_tool_calls,
            "previous_response_id": None,
            "prompt": None,
            "reasoning": None if body.reasoning is None else body.reasoning.echo(),
            "service_tier": body.service_tier,
            "status": status,
            "text": None if body.text is None else body.text.echo(),
            "top_logprobs": None,
            "truncation": body.truncation,
            "usage": usage,
            "user": body.user,
            "presence_penalty": sampling["presence_penalty"],
            "frequency_penalty": sampling["frequency_penalty"],
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "input_messages": None,
            "output_messages": None,
        }


def _status(finish_reason: str | None) -> str:
    return "incomplete" if finish_reason == "length" else "completed"


def _shown_sampling(body: ResponsesRequest, info: LlmInfo, prompt_tokens: int) -> dict[str, Any]:
    """The sampling values the engine runs with, as vLLM's response shows its SamplingParams."""
    defaults = info.generation_defaults or GenerationDefaults()

    def value(given: float | None, default: float | None, neutral: float) -> float:
        return float(given if given is not None else default if default is not None else neutral)

    temperature = value(body.temperature, defaults.temperature, 1.0)
    top_p = value(body.top_p, defaults.top_p, 1.0)
    if 0 < temperature < _MAX_TEMP:
        temperature = _MAX_TEMP
    if temperature < _SAMPLING_EPS:
        top_p = 1.0
    room = info.max_model_len - prompt_tokens
    limit = body.max_output_tokens if body.max_output_tokens is not None else defaults.max_tokens
    return {
        "temperature": temperature,
        "top_p": top_p,
        "max_tokens": room if limit is None else min(room, limit),
        "presence_penalty": value(body.presence_penalty, defaults.presence_penalty, 0.0),
        "frequency_penalty": value(body.frequency_penalty, defaults.frequency_penalty, 0.0),
    }


def _written(usage: TextUsage | None) -> int:
    """The prompt tokens the engine wrote to its prefix cache (0 where it does not say, as vLLM's)."""
    return (usage.cache_creation_tokens or 0) if usage is not None else 0
