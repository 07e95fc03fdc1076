"""The output of `POST /v1/chat/completions`: SSE chunks or one `chat.completion` body, as vLLM's.

Streams open with one role chunk per choice (`{"role": ..., "content": ""}`), as vLLM sends them before the
first content; then one chunk per delta.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from vllm_llm import ChatDelta, ChatStream
from vllm_server.http.openai.chat_request import ChatCompletionRequest
from vllm_server.http.openai.choices import ChoiceLog, collect_choices
from vllm_server.http.openai.codec import encode
from vllm_server.http.openai.logprobs import chat_logprobs, prompt_logprobs_json
from vllm_server.http.openai.sse import DONE, close_shielded, error_event, event
from vllm_server.http.openai.usage import usage_json
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
    ) -> None:
        self.body = body
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
        include_usage, continuous = self.body.usage_options()
        produced = [0] * self.n
        cached = 0
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
                        cached = d.usage.cached_tokens
                    last = d.finish_reason or last
                    choice = self._chunk_choice(d, produced[d.index])
                    produced[d.index] += len(d.token_ids)
                    if choice is None:
                        continue
                    frame = prefix + encode(choice) + b"]"
                    if continuous:
                        frame += b',"usage":' + encode(usage_json(self.prompt_tokens, produced[d.index]))
                    yield frame + b"}\n\n"
                if include_usage:
                    usage = usage_json(self.prompt_tokens, sum(produced), cached)
                    yield event(encode(self._envelope("chat.completion.chunk", [], usage)))
                reason = last
            except Exception as exc:
                yield error_event(exc)
            yield DONE
        finally:
            await close_shielded(self.stream)
            self.metrics.finish(reason)

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
                frames.append(event(encode(chunk)))
        return frames

    def _chunk_choice(self, d: ChatDelta, produced: int) -> dict[str, Any] | None:
        if not d.content and not d.token_ids and not produced and d.finish_reason is None:
            return None  # nothing yet (vLLM's chunked-prefill case)
        body = self.body
        choice: dict[str, Any] = {
            "index": d.index,
            "delta": {"content": d.content},
            "logprobs": chat_logprobs(d.logprobs or (), body.num_top_logprobs) if body.logprobs else None,
            "finish_reason": d.finish_reason,
        }
        if d.finish_reason is not None:
            choice["stop_reason"] = d.stop_reason
        if body.return_token_ids:
            choice["token_ids"] = d.token_ids
        return choice

    # ---- whole ------------------------------------------------------------------------------------

    async def response(self) -> dict[str, Any]:
        """Read the stream to its end and build the `chat.completion` body."""
        got = await collect_choices(self.stream, self.n, self.metrics, lambda d: d.content)
        body = self.body
        out = self._envelope(
            "chat.completion",
            [self._choice(i, log) for i, log in enumerate(got.logs)],
            usage_json(self.prompt_tokens, got.completion_tokens, got.cached_tokens),
        )
        out["service_tier"] = None
        out["system_fingerprint"] = None
        out["prompt_logprobs"] = (
            prompt_logprobs_json(got.prompt_logprobs) if body.prompt_logprobs is not None else None
        )
        out["prompt_token_ids"] = self.stream.prompt.prompt_token_ids if body.return_token_ids else None
        out["kv_transfer_params"] = got.kv_transfer_params
        return out

    def _choice(self, index: int, log: ChoiceLog) -> dict[str, Any]:
        body = self.body
        role = self.stream.role
        message: dict[str, Any] = {
            "role": role,
            "content": body.echoed_content(role) + log.text,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
            # No "tool_calls": vLLM's ChatMessage leaves an empty list out of the JSON.
            "reasoning": None,
        }
        logprobs = chat_logprobs(log.logprobs or (), body.num_top_logprobs) if body.logprobs else None
        return {
            "index": index,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": log.finish_reason or "stop",
            "stop_reason": log.stop_reason,
            "token_ids": log.token_ids if body.return_token_ids else None,
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
