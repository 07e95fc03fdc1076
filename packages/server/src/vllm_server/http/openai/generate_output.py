"""The output of `POST /inference/v1/generate` (tokens in, tokens out), as vLLM's ServingTokens.

`output_mode="tokens"` reports token ids and id-keyed logprobs; `"text"` adds the detokenized text and
chat-style logprobs. Streams carry one chunk per delta, the usage chunk if asked for, then [DONE].
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from vllm_llm import TextStream, TokenLogprobs
from vllm_server.http.openai.choices import collect_choices
from vllm_server.http.openai.codec import encode
from vllm_server.http.openai.generate_request import GenerateBody
from vllm_server.http.openai.logprobs import chat_logprobs, prompt_logprobs_json, token_id_logprobs
from vllm_server.http.openai.raw_stream import RawTokenStream
from vllm_server.http.openai.sse import DONE, close_shielded, error_event, event
from vllm_server.http.openai.usage import PromptTokensDetails, usage_json
from vllm_server.metrics import RequestMetrics
from vllm_server.request_checks import check_finish
from vllm_server.request_log import OutputLog

__all__ = ["TokensOutput"]


class TokensOutput:
    """The response of one tokens-in / tokens-out request over its started stream."""

    def __init__(
        self,
        body: GenerateBody,
        stream: TextStream | RawTokenStream,
        *,
        request_id: str,
        model: str,
        metrics: RequestMetrics,
        output_log: OutputLog | None = None,
        prompt_tokens_details: bool = False,
    ) -> None:
        self.body = body
        #: --enable-prompt-tokens-details: usage carries the prompt's cached tokens.
        self.prompt_tokens_details = prompt_tokens_details
        self.output_log = output_log
        self.stream = stream
        self.request_id = request_id
        self.model = model
        self.metrics = metrics
        self.text_mode = body.output_mode == "text"
        self.n = body.sampling_params.n
        self.prompt_tokens = len(stream.prompt_token_ids)

    async def frames(self) -> AsyncIterator[bytes]:
        """The SSE frames."""
        include_usage, continuous = _usage_options(self.body)
        produced = [0] * self.n
        cached: int | None = None
        head = encode({"request_id": self.request_id, "output_mode": self.body.output_mode})
        prefix = b"data: " + head[:-1] + b',"choices":['
        first = True
        reason: str | None = None
        last: str | None = None
        try:
            try:
                async for d in self.stream:
                    check_finish(d.finish_reason)
                    self.metrics.tokens(len(d.token_ids))
                    produced[d.index] += len(d.token_ids)
                    last = d.finish_reason or last
                    if cached is None and d.num_cached_tokens is not None:
                        cached = d.num_cached_tokens
                    if not (d.token_ids or d.finish_reason is not None or (self.text_mode and d.text)):
                        continue
                    choice = self._choice(
                        d.index, d.text, d.token_ids, d.logprobs, (d.finish_reason, d.stop_reason)
                    )
                    frame = prefix + encode(choice) + b"]"
                    if continuous:
                        frame += b',"usage":' + encode(usage_json(self.prompt_tokens, produced[d.index]))
                    if first and self.body.return_token_ids:
                        frame += b',"prompt_token_ids":' + encode(self.stream.prompt_token_ids)
                    first = False
                    yield frame + b"}\n\n"
                if include_usage:
                    usage = usage_json(
                        self.prompt_tokens, sum(produced), details=self._details(cached, streamed=True)
                    )
                    final = {
                        "request_id": self.request_id,
                        "usage": usage,
                        "output_mode": self.body.output_mode,
                        "choices": [],
                    }
                    yield event(encode(final))
                reason = last
            except Exception as exc:
                yield error_event(exc)
            yield DONE
        finally:
            await close_shielded(self.stream)
            self.metrics.finish(reason)

    async def response(self) -> dict[str, Any]:
        """Read the stream to its end and build the response body."""
        got = await collect_choices(self.stream, self.n, self.metrics, lambda d: d.text)
        choices = [
            self._choice(
                i, log.text, log.token_ids, log.logprobs, (log.finish_reason or "stop", log.stop_reason)
            )
            for i, log in enumerate(got.logs)
        ]
        if self.output_log is not None:
            for choice in choices:
                if choice["token_ids"]:  # as vLLM: the token ids alone, of a choice that has some
                    self.output_log.log(self.request_id, "", choice["token_ids"], choice["finish_reason"])
        return {
            "request_id": self.request_id,
            "model": self.model,
            "created": int(time.time()),
            "usage": usage_json(
                self.prompt_tokens,
                got.completion_tokens,
                details=self._details(got.cached_tokens if got.usage is not None else None, streamed=False),
            ),
            "prompt_logprobs": prompt_logprobs_json(got.prompt_logprobs),
            "prompt_token_ids": self.stream.prompt_token_ids if self.body.return_token_ids else None,
            "kv_transfer_params": got.kv_transfer_params,
            "output_mode": self.body.output_mode,
            "choices": choices,
        }

    def _details(self, cached: int | None, *, streamed: bool) -> dict[str, Any] | None:
        """`prompt_tokens_details` under --enable-prompt-tokens-details (vLLM's ServingTokens: the cached
        tokens alone)."""
        if not self.prompt_tokens_details or cached is None:
            return None
        return PromptTokensDetails(cached).json(streamed=streamed)

    def _choice(
        self,
        index: int,
        text: str,
        token_ids: list[int],
        positions: list[TokenLogprobs] | None,
        finish: tuple[str | None, int | str | None],
    ) -> dict[str, Any]:
        k = self.body.sampling_params.logprobs
        logprobs: dict[str, Any] | None = None
        if k is not None:
            if self.text_mode:
                logprobs = chat_logprobs(positions or (), k if k == -1 else max(k, 1))
            else:
                logprobs = token_id_logprobs([p.candidates for p in positions or ()], k)
        choice: dict[str, Any] = {
            "index": index,
            "finish_reason": finish[0],
            "stop_reason": finish[1],
            "token_ids": token_ids,
            "logprobs": logprobs,
        }
        if self.text_mode:
            choice["text"] = text
        return choice


def _usage_options(body: GenerateBody) -> tuple[bool, bool]:
    options = body.stream_options
    if options is None or not options.include_usage:
        return False, False
    return True, bool(options.continuous_usage_stats)
