"""The SSE events of a streamed `POST /v1/messages`, in vLLM's order.

`message_start`; then content blocks, each `content_block_start`, its `content_block_delta`s (text_delta,
thinking_delta, input_json_delta; a thinking block ends with a signature_delta) and `content_block_stop`;
then `message_delta` (stop reason and usage) and `message_stop`. Text that arrives while a tool_use block
is open is held and sent as its own text block once that block ends. vLLM sends no `ping`. An error after
the response has started is an `error` event, and the stream ends there.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

from vllm_llm import ChatDelta, ChatStream, TextUsage
from vllm_server.errors import map_error
from vllm_server.http.anthropic.message_output import stop_reason, usage_json
from vllm_server.http.openai import encode
from vllm_server.http.openai.sse import close_shielded
from vllm_server.metrics import RequestMetrics
from vllm_server.request_checks import check_finish
from vllm_server.request_log import OutputLog

__all__ = ["MessageStream", "sse_event"]


def sse_event(payload: dict[str, Any]) -> bytes:
    """One SSE frame named by the payload's type."""
    kind: str = payload["type"]
    return b"event: " + kind.encode() + b"\ndata: " + encode(payload) + b"\n\n"


class _Blocks:
    """The content block being streamed, and how many came before it."""

    def __init__(self) -> None:
        self.next_index = 0
        self.kind: str | None = None
        self.index: int | None = None
        self.signature: str | None = None
        self.tool_use_id: str | None = None
        self.pending: list[str] = []

    def start(self, block: dict[str, Any]) -> bytes:
        self.kind = block["type"]
        self.index = self.next_index
        self.signature = uuid.uuid4().hex if self.kind == "thinking" else None
        self.tool_use_id = block.get("id") if self.kind == "tool_use" else None
        return sse_event({"type": "content_block_start", "content_block": block, "index": self.index})

    def delta(self, delta: dict[str, Any]) -> bytes:
        index = self.index if self.index is not None else self.next_index
        return sse_event({"type": "content_block_delta", "delta": delta, "index": index})

    def stop(self) -> list[bytes]:
        if self.kind is None:
            return []
        events = []
        if self.signature is not None:
            events.append(self.delta({"type": "signature_delta", "signature": self.signature}))
        events.append(sse_event({"type": "content_block_stop", "index": self.index}))
        self.kind = self.index = self.signature = self.tool_use_id = None
        self.next_index += 1
        return events

    def stop_and_flush(self) -> list[bytes]:
        """End the open block, then send the text held back while it was a tool_use block."""
        held = "".join(self.pending)
        self.pending.clear()
        events = self.stop()
        if held:
            events.append(self.start({"type": "text", "text": ""}))
            events.append(self.delta({"type": "text_delta", "text": held}))
            events += self.stop()
        return events


class MessageStream:
    """The events of one streamed message over its started chat stream."""

    def __init__(
        self,
        stream: ChatStream,
        *,
        message_id: str,
        model: str,
        metrics: RequestMetrics,
        output_log: OutputLog | None = None,
        prompt_tokens_details: bool = False,
    ) -> None:
        self.stream = stream
        #: --enable-prompt-tokens-details: message_delta's usage reports the cache (message_start's does
        #: not: vLLM builds it from a chunk before any usage details).
        self.prompt_tokens_details = prompt_tokens_details
        self.output_log = output_log
        self.message_id = message_id
        self.model = model
        self.metrics = metrics
        self.prompt_tokens = len(stream.prompt.prompt_token_ids)
        self._blocks = _Blocks()
        self._tool_ids: dict[int, str] = {}
        self._tool_used = False
        self._last_tool_args: list[str] = []

    async def frames(self) -> AsyncIterator[bytes]:
        """The SSE frames (see the module docstring)."""
        blocks = self._blocks
        produced = 0
        finish: str | None = None
        matched: int | str | None = None
        started = False
        log = self.output_log
        text = ""
        usage: TextUsage | None = None
        try:
            async for d in self.stream:
                check_finish(d.finish_reason)
                self.metrics.tokens(len(d.token_ids))
                if not started:
                    started = True
                    yield self._message_start()
                produced += len(d.token_ids)
                text += d.text
                usage = d.usage or usage
                if log is not None:
                    log.chat_delta(self.message_id, d)
                if d.finish_reason is not None:
                    finish, matched = d.finish_reason, d.stop_reason
                for frame in self._delta_events(d):
                    yield frame
            for frame in blocks.stop_and_flush():
                yield frame
            if log is not None:
                log.chat_streamed(self.message_id, [text])
            complete = self._tool_used and _is_json("".join(self._last_tool_args))
            reason, sequence = stop_reason(
                finish or "stop", matched, tool_used=self._tool_used, tool_complete=complete
            )
            yield sse_event(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": sequence},
                    "usage": usage_json(
                        self.prompt_tokens, produced, usage, details=self.prompt_tokens_details
                    ),
                }
            )
            yield sse_event({"type": "message_stop"})
        except Exception as exc:
            error = {"type": "internal_error", "message": map_error(exc).message}
            yield sse_event({"type": "error", "error": error})
        finally:
            await close_shielded(self.stream)
            self.metrics.finish(finish)

    def _message_start(self) -> bytes:
        message: dict[str, Any] = {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self.model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage_json(self.prompt_tokens, 0),
        }
        return sse_event({"type": "message_start", "message": message})

    def _delta_events(self, d: ChatDelta) -> list[bytes]:
        blocks = self._blocks
        events: list[bytes] = []
        if d.reasoning:
            if blocks.kind != "thinking":
                events += blocks.stop_and_flush()
                events.append(blocks.start({"type": "thinking", "thinking": ""}))
            events.append(blocks.delta({"type": "thinking_delta", "thinking": d.reasoning}))
        if d.content:
            if blocks.kind == "tool_use":
                blocks.pending.append(d.content)
            else:
                if blocks.kind != "text":
                    events += blocks.stop_and_flush()
                    events.append(blocks.start({"type": "text", "text": ""}))
                events.append(blocks.delta({"type": "text_delta", "text": d.content}))
        for call in d.tool_calls:
            call_id = call.id
            if call_id is not None:
                self._tool_ids[call.index] = call_id
                if blocks.tool_use_id != call_id and call.name is not None:
                    events += blocks.stop_and_flush()
                    self._tool_used = True
                    self._last_tool_args = []
                    block = {"type": "tool_use", "id": call_id, "name": call.name, "input": {}}
                    events.append(blocks.start(block))
            else:
                call_id = self._tool_ids.get(call.index)
            if call_id is not None and call.arguments and blocks.tool_use_id == call_id:
                self._last_tool_args.append(call.arguments)
                events.append(blocks.delta({"type": "input_json_delta", "partial_json": call.arguments}))
        return events


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True
