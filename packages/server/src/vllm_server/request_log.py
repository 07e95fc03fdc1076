"""The request log (vLLM's `--enable-log-requests`, `--max-log-len`): one line per request an Llm takes.

`RequestLogLlm` wraps the served Llm, so every way in (chat, completions, /generate, vllm.Inference,
vllm.internal.Llm) logs the lowered request once, under its external request id: a router and its
worker log the same id (a client's `X-Request-Id` is in it), which is how one request is followed
through both. As vLLM's `RequestLogger.log_inputs`: the id, sampling parameters and LoRA adapter at
INFO; the prompt's token ids (at most `max_log_len` of them) at DEBUG. The prompt's text is the text
layer's and is not logged here.

`OutputLog` is the outputs half (`--enable-log-outputs`): the routes call it where the output text exists.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from vllm_llm import ChatDelta, GenerateStream, Llm
from vllm_llm.delegating import DelegatingLlm
from vllm_llm.wire import GenerateRequest
from vllm_server.config import ServerConfig

__all__ = ["OutputLog", "RequestLogLlm", "output_log"]

logger = logging.getLogger(__name__)


class RequestLogLlm(DelegatingLlm):
    """Logs each request `generate` takes, then forwards it."""

    def __init__(self, inner: Llm, *, max_log_len: int | None) -> None:
        super().__init__(inner)
        self.max_log_len = max_log_len
        if not logger.isEnabledFor(logging.INFO):
            logger.warning(
                "--enable-log-requests is set but the log level is above INFO: no request is logged"
            )

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Log `request`, then generate on the inner Llm."""
        if logger.isEnabledFor(logging.DEBUG):
            ids = request.prompt_token_ids
            if self.max_log_len is not None:
                ids = ids[: self.max_log_len]
            embeds = request.prompt_embeds
            logger.debug(
                "Request %s details: prompt_token_ids: %s, prompt_embeds shape: %s.",
                request.request_id,
                ids,
                None if embeds is None else tuple(embeds.shape),
            )
        logger.info(
            "Received request %s: params: %s, lora_request: %s.",
            request.request_id,
            request.sampling_params,
            request.lora_request,
        )
        return await self.inner.generate(request)


class OutputLog:
    """The outputs half of the request log (vLLM's `--enable-log-outputs`, `RequestLogger.log_outputs`).

    The serving layer calls it where the text exists (the HTTP routes, over the chat and text layers), as
    vLLM's serving classes do: chat completions and Anthropic messages log each streamed delta (unless
    `deltas` is off, vLLM's `--no-enable-log-deltas`) and the whole text at the stream's end, or each
    choice of a whole response; Responses log the final text; `/inference/v1/generate` logs a whole
    response's token ids. At INFO the id, the text (at most `max_log_len` characters) and the finish
    reason; at DEBUG the token ids (at most `max_log_len` of them).
    """

    def __init__(self, *, max_log_len: int | None, deltas: bool) -> None:
        self.max_log_len = max_log_len
        self.deltas = deltas

    def log(
        self,
        request_id: str,
        text: str,
        token_ids: Sequence[int] | None,
        finish_reason: str | None,
        *,
        streaming: bool = False,
        delta: bool = False,
    ) -> None:
        """One output: a whole one, a streamed delta (`delta`) or a stream's whole text (`streaming`)."""
        limit = self.max_log_len
        stream_info = ""
        if streaming:
            stream_info = " (streaming delta)" if delta else " (streaming complete)"
        if logger.isEnabledFor(logging.DEBUG):
            ids = None if token_ids is None else list(token_ids)[:limit]
            logger.debug(
                "Generated response %s%s details: output_token_ids: %s", request_id, stream_info, ids
            )
        logger.info(
            "Generated response %s%s: output: %r, finish_reason: %s",
            request_id,
            stream_info,
            text[:limit],
            finish_reason,
        )

    def chat_delta(self, request_id: str, d: ChatDelta) -> None:
        """A streamed chat delta: its content, reasoning and tool-call arguments, when it has any."""
        if not self.deltas:
            return
        parts = []
        if d.content:
            parts.append(d.content)
        if d.reasoning:
            parts.append(f"[reasoning: {d.reasoning}]")
        arguments = "".join(c.arguments for c in d.tool_calls if c.arguments)
        if arguments:
            parts.append(f"[tool_calls: {arguments}]")
        if parts:
            self.log(request_id, " ".join(parts), d.token_ids, d.finish_reason, streaming=True, delta=True)

    def chat_streamed(self, request_id: str, texts: Sequence[str]) -> None:
        """A finished chat stream: each choice's whole raw text (vLLM's reason: "streaming_complete")."""
        for text in texts:
            self.log(request_id, text, None, "streaming_complete", streaming=True)

    def chat_choice(
        self,
        request_id: str,
        content: str | None,
        tool_calls: Sequence[tuple[str, object]],
        token_ids: Sequence[int],
        finish_reason: str | None,
    ) -> None:
        """One whole chat choice: its content, else its tool calls as `name(arguments)`; else nothing."""
        text = content or ""
        if not text and tool_calls:
            text = "[tool_calls: " + ", ".join(f"{name}({arguments})" for name, arguments in tool_calls) + "]"
        if text:
            self.log(request_id, text, token_ids, finish_reason)


def output_log(server: ServerConfig) -> OutputLog | None:
    """The output log a server configured by `server` keeps, if any (--enable-log-outputs)."""
    if not (server.enable_log_requests and server.enable_log_outputs):
        return None
    return OutputLog(max_log_len=server.max_log_len, deltas=server.enable_log_deltas)
