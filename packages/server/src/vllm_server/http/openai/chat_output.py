"""The output of `POST /v1/chat/completions`: SSE chunks or one `chat.completion` body, as vLLM's.

Streams open with one role chunk per choice (`{"role": ..., "content": ""}`), as vLLM sends them before the
first content; then one chunk per delta.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from vllm_llm import ChatChoice, ChatDelta, ChatStream, TextUsage, ToolCallDelta
from vllm_server.http.openai.chat_request import ChatCompletionRequest
from vllm_server.http.openai.choices import collect_choices
from vllm_server.http.openai.codec import encode
from vllm_server.http.openai.logprobs import chat_logprobs, prompt_logprobs_json
from vllm_server.http.openai.options import DEFAULT_OPTIONS, ServingOptions
from vllm_server.http.openai.sse import DONE, close_shielded, error_event, event
from vllm_server.http.openai.usage import PromptTokensDetails, usage_json
from vllm_server.metrics import RequestMetrics
from vllm_server.request_checks import check_finish

__all__ = ["ChatOutput"]


class ChatOutput:
    """The response of one chat request over its started stream."""

    def __init__(
        self,
        body: ChatCompletionRequest,
        stream: ChatStream,
        *,
        request_id: str,
        model: str,
        metrics: RequestMetrics,
        options: ServingOptions = DEFAULT_OPTIONS,
        fingerprint: str | None = None,
    ) -> None:
        self.body = body
        self.options = options
        #: The system_fingerprint (`fingerprint.system_fingerprint`): on a whole response, and, as vLLM
        #: stamps a stream, on each choice's last chunk when no usage chunk follows, else on that.
        self.fingerprint = fingerprint
        self.as_ids = body.tokens_as_ids(options.return_tokens_as_token_ids)
        self.stream = stream
        self.request_id = request_id
        self.model = model
        self.metrics = metrics
        self.created = int(time.time())
        self.n = body.n or 1
        self.prompt_tokens = len(stream.prompt.prompt_token_ids)

    # ---- streaming ----------------------------------------------------------------------------------

    async def frames(self) -> AsyncIterator[bytes]:
        """The SSE frames: role chunks, one chunk per delta, the usage chunk if asked for, then [DONE]."""
        include_usage, continuous = self.body.usage_options(self.options.force_include_usage)
        produced = [0] * self.n
        reasoning = [0] * self.n
        outputs: list[list[int]] = [[] for _ in range(self.n)]
        texts = [""] * self.n
        log = self.options.output_log
        counts = self.stream.counts_reasoning_tokens
        usage_of_text: TextUsage | None = None
        prefix = self._chunk_prefix()
        started = False
        reason: str | None = None
        last: str | None = None
        try:
            try:
                async for d in self.stream:
                    check_finish(d.finish_reason)
                    self.metrics.tokens(len(d.token_ids))
                    if not started:
                        started = True
                        for frame in self._opening_frames(continuous):
                            yield frame
                    if d.usage is not None:
                        usage_of_text = d.usage
                    last = d.finish_reason or last
                    choice = self._chunk_choice(d, produced[d.index])
                    produced[d.index] += len(d.token_ids)
                    texts[d.index] += d.text
                    if counts:
                        outputs[d.index].extend(d.token_ids)
                        if continuous or d.finish_reason is not None:
                            reasoning[d.index] = self.stream.count_reasoning_tokens(outputs[d.index])
                    if choice is None:
                        continue
                    if log is not None:
                        log.chat_delta(self.request_id, d)
                    frame = prefix + encode(choice) + b"]"
                    if continuous:
                        usage = usage_json(
                            self.prompt_tokens,
                            produced[d.index],
                            reasoning_tokens=reasoning[d.index] if counts else None,
                        )
                        frame += b',"usage":' + encode(usage)
                    if d.finish_reason is not None and not include_usage:
                        frame += self._fingerprint_field()
                    yield frame + b"}\n\n"
                if include_usage:
                    usage = usage_json(
                        self.prompt_tokens,
                        sum(produced),
                        sum(reasoning) if counts else None,
                        details=self._details(usage_of_text, streamed=True),
                    )
                    chunk = encode(self._envelope("chat.completion.chunk", [], usage))
                    yield event(chunk[:-1] + self._fingerprint_field() + b"}")
                if log is not None:
                    log.chat_streamed(self.request_id, texts)
                reason = last
            except Exception as exc:
                yield error_event(exc)
            yield DONE
        finally:
            await close_shielded(self.stream)
            self.metrics.finish(reason)

    def _details(self, usage: TextUsage | None, *, streamed: bool) -> dict[str, Any] | None:
        """`prompt_tokens_details` under --enable-prompt-tokens-details."""
        if not self.options.prompt_tokens_details:
            return None
        return PromptTokensDetails.of_chat(usage, self.stream.multimodal_tokens).json(streamed=streamed)

    def _fingerprint_field(self) -> bytes:
        """`,"system_fingerprint":...` for a chunk's JSON, or nothing (vLLM leaves a null one out)."""
        return b"" if self.fingerprint is None else b',"system_fingerprint":' + encode(self.fingerprint)

    def _chunk_prefix(self) -> bytes:
        head = encode({"id": self.request_id, "object": "chat.completion.chunk", "created": self.created})
        return b"data: " + head[:-1] + b',"model":' + encode(self.model) + b',"choices":['

    def _opening_frames(self, continuous: bool) -> list[bytes]:
        role = self.stream.role
        frames = []
        echoed = self.body.echoed_content(role)
        deltas: list[dict[str, Any]] = [{"role": role, "content": ""}]
        if echoed:
            deltas.append({"content": echoed})
        for delta in deltas:
            for i in range(self.n):
                choice = {"index": i, "delta": delta, "logprobs": None, "finish_reason": None}
                chunk = self._envelope("chat.completion.chunk", [choice], None)
                if continuous:
                    chunk["usage"] = usage_json(self.prompt_tokens, 0)
                if self.body.return_token_ids and "role" in delta:
                    chunk["prompt_token_ids"] = self.stream.prompt.prompt_token_ids
                if self.body.return_prompt_text and "role" in delta:
                    chunk["prompt_text"] = self.stream.prompt.prompt
                frames.append(event(encode(chunk)))
        return frames

    def _chunk_choice(self, d: ChatDelta, produced: int) -> dict[str, Any] | None:
        body = self.body
        parsing = self.stream.parsing
        nothing = d.content is None and d.reasoning is None and not d.tool_calls
        if not d.text and not d.token_ids and not produced and d.finish_reason is None:
            return None  # nothing yet (vLLM's chunked-prefill case)
        hide = parsing and not body.include_reasoning  # vLLM hides per-token metadata with the reasoning
        logprobs = (
            chat_logprobs(d.logprobs or (), body.shown_top_logprobs, as_ids=self.as_ids)
            if body.logprobs and not hide
            else None
        )
        token_ids = body.return_token_ids and not hide
        if nothing and d.finish_reason is None and logprobs is None and not token_ids:
            return None  # the parser holds it back
        choice: dict[str, Any] = {
            "index": d.index,
            "delta": _delta_json(d),
            "logprobs": logprobs,
            "finish_reason": d.finish_reason,
        }
        if d.finish_reason is not None:
            choice["stop_reason"] = d.stop_reason
        if token_ids:
            choice["token_ids"] = d.token_ids
        return choice

    # ---- whole ------------------------------------------------------------------------------------

    async def response(self) -> dict[str, Any]:
        """Read the stream to its end, parse each choice whole and build the `chat.completion` body."""
        self.stream.parse_deltas = False
        got = await collect_choices(self.stream, self.n, self.metrics, lambda d: d.text)
        body = self.body
        choices = [
            self.stream.parse_choice(
                i, log.text, log.token_ids, log.logprobs, log.finish_reason, log.stop_reason
            )
            for i, log in enumerate(got.logs)
        ]
        reasoning = sum(c.reasoning_tokens for c in choices) if self.stream.counts_reasoning_tokens else None
        shown = [self._choice(c) for c in choices]
        self._log_choices(shown, choices)
        out = self._envelope(
            "chat.completion",
            shown,
            usage_json(
                self.prompt_tokens,
                got.completion_tokens,
                reasoning,
                details=self._details(got.usage, streamed=False),
            ),
        )
        out["service_tier"] = None
        out["system_fingerprint"] = self.fingerprint
        # whatever the engine computed, as vLLM's (echo with top_logprobs asks for them too)
        out["prompt_logprobs"] = prompt_logprobs_json(got.prompt_logprobs)
        out["prompt_token_ids"] = self.stream.prompt.prompt_token_ids if body.return_token_ids else None
        out["prompt_text"] = self.stream.prompt.prompt if body.return_prompt_text else None
        out["kv_transfer_params"] = got.kv_transfer_params
        return out

    def _log_choices(self, shown: list[dict[str, Any]], choices: list[ChatChoice]) -> None:
        """Each whole choice as the client sees it (echo included), in the output log if kept."""
        log = self.options.output_log
        if log is None:
            return
        for choice, c in zip(shown, choices, strict=True):
            message = choice["message"]
            calls = [
                (t["function"]["name"], t["function"]["arguments"]) for t in message.get("tool_calls", ())
            ]
            log.chat_choice(self.request_id, message["content"], calls, c.token_ids, choice["finish_reason"])

    def _choice(self, c: ChatChoice) -> dict[str, Any]:
        body = self.body
        role = self.stream.role
        echoed = body.echoed_content(role)
        content = c.content
        if echoed:
            content = echoed + (content or "")
        message: dict[str, Any] = {
            "role": role,
            "content": content,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
        }
        if c.tool_calls:  # vLLM's ChatMessage leaves an empty list out of the JSON
            message["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in c.tool_calls
            ]
        message["reasoning"] = c.reasoning
        hide = self.stream.parsing and not body.include_reasoning  # vLLM's suppress_metadata
        logprobs = (
            chat_logprobs(c.logprobs or (), body.shown_top_logprobs, as_ids=self.as_ids)
            if body.logprobs and not hide
            else None
        )
        return {
            "index": c.index,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": c.finish_reason or "stop",
            "stop_reason": c.stop_reason,
            "token_ids": c.token_ids if body.return_token_ids and not hide else None,
        }

    def _envelope(
        self, kind: str, choices: list[dict[str, Any]], usage: dict[str, Any] | None
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.request_id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            out["usage"] = usage
        return out


def _delta_json(d: ChatDelta) -> dict[str, Any]:
    """The delta as vLLM's DeltaMessage dumps it (unset fields left out)."""
    delta: dict[str, Any] = {}
    if d.content is not None:
        delta["content"] = d.content
    if d.reasoning is not None:
        delta["reasoning"] = d.reasoning
    if d.tool_calls:
        delta["tool_calls"] = [_call_delta_json(c) for c in d.tool_calls]
    return delta


def _call_delta_json(c: ToolCallDelta) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if c.id is not None:
        out["id"] = c.id
        out["type"] = "function"
    out["index"] = c.index
    function: dict[str, Any] = {}
    if c.name is not None:
        function["name"] = c.name
    if c.arguments is not None:
        function["arguments"] = c.arguments
    if function:
        out["function"] = function
    return out
