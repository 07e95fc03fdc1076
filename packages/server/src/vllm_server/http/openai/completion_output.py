"""The output of `POST /v1/completions`: SSE chunks (one per delta) or one `text_completion` body, as vLLM's.

Several prompts run as several text requests; choice `i` of prompt `p` is reported at index `p * n + i`.
`echo` prepends the prompt (text, tokens and prompt logprobs) to each choice's first delta.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

from vllm_llm import TextDelta, TextLlm, TextRequest, TextStream, TextUsage, TokenLogprobs
from vllm_server.http.openai.choices import ChoiceLog
from vllm_server.http.openai.codec import encode
from vllm_server.http.openai.completion_request import CompletionRequest
from vllm_server.http.openai.logprobs import completion_logprobs, prompt_logprobs_json
from vllm_server.http.openai.merge import MergedStreams
from vllm_server.http.openai.options import DEFAULT_OPTIONS, ServingOptions
from vllm_server.http.openai.sse import DONE, close_shielded, error_event, event
from vllm_server.http.openai.usage import PromptTokensDetails, usage_json, usage_of
from vllm_server.metrics import RequestMetrics
from vllm_server.request_checks import check_finish, vllm_wording

__all__ = ["CompletionOutput", "start_streams"]


async def start_streams(text: TextLlm, requests: Sequence[TextRequest]) -> list[TextStream]:
    """Submit every request (validation errors raise here, before any response); all or none."""
    streams: list[TextStream] = []
    try:
        with vllm_wording():
            for request in requests:
                streams.append(await text.generate(request))
    except BaseException:
        for stream in streams:
            await close_shielded(stream)
        raise
    return streams


class CompletionOutput:
    """The response of one completion request over its started text streams."""

    def __init__(
        self,
        body: CompletionRequest,
        text: TextLlm,
        requests: Sequence[TextRequest],
        streams: Sequence[TextStream],
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
        self.text = text
        self.prompts = [r.prompt for r in requests]
        self.streams = list(streams)
        self.merged = MergedStreams(self.streams)
        self.request_id = request_id
        self.model = model
        self.metrics = metrics
        self.created = int(time.time())
        self.n = body.n or 1
        self.num_choices = len(self.streams) * self.n

    # ---- streaming ----------------------------------------------------------------------------------

    async def frames(self) -> AsyncIterator[bytes]:
        """The SSE frames: one chunk per delta, the usage chunk if asked for, then [DONE]."""
        include_usage, continuous = self.body.usage_options(self.options.force_include_usage)
        prompt_lens = [len(s.prompt_token_ids) for s in self.streams]
        produced = [0] * self.num_choices
        cached: int | None = None  # vLLM's: the first output's, whichever prompt it is of
        offsets = [0] * self.num_choices
        echoed = [False] * self.num_choices
        prefix = self._chunk_prefix()
        reason: str | None = None
        last: str | None = None
        try:
            try:
                async for p, d in self.merged:
                    check_finish(d.finish_reason)
                    self.metrics.tokens(len(d.token_ids))
                    i = p * self.n + d.index
                    last = d.finish_reason or last
                    if cached is None and d.num_cached_tokens is not None:
                        cached = d.num_cached_tokens
                    choice = self._chunk_choice(i, p, d, produced[i], offsets, echoed)
                    produced[i] += len(d.token_ids)
                    if choice is None:
                        continue
                    frame = prefix + encode(choice) + b"]"
                    if continuous:
                        frame += b',"usage":' + encode(usage_json(prompt_lens[p], produced[i]))
                    if d.finish_reason is not None and not include_usage:
                        frame += self._fingerprint_field()
                    yield frame + b"}\n\n"
                if include_usage:
                    details = None
                    if self.options.prompt_tokens_details and cached is not None:
                        details = PromptTokensDetails(cached).json(streamed=True)
                    usage = usage_json(sum(prompt_lens), sum(produced), details=details)
                    chunk = encode(self._envelope([], usage=usage))
                    yield event(chunk[:-1] + self._fingerprint_field() + b"}")
                reason = last
            except Exception as exc:
                yield error_event(exc)
            yield DONE
        finally:
            await close_shielded(self.merged)
            self.metrics.finish(reason)

    def _fingerprint_field(self) -> bytes:
        """`,"system_fingerprint":...` for a chunk's JSON, or nothing (vLLM leaves a null one out)."""
        return b"" if self.fingerprint is None else b',"system_fingerprint":' + encode(self.fingerprint)

    def _chunk_prefix(self) -> bytes:
        head = encode({"id": self.request_id, "object": "text_completion", "created": self.created})
        return b"data: " + head[:-1] + b',"model":' + encode(self.model) + b',"choices":['

    def _chunk_choice(
        self, i: int, p: int, d: TextDelta, produced: int, offsets: list[int], echoed: list[bool]
    ) -> dict[str, Any] | None:
        body = self.body
        text, token_ids = d.text, d.token_ids
        positions: Sequence[TokenLogprobs | None] | None = d.logprobs
        if body.echo and not echoed[i]:
            echoed[i] = True
            text, token_ids, positions = self._echoed(p, text, token_ids, positions, d.prompt_logprobs)
        elif not text and not token_ids and not produced and d.finish_reason is None:
            return None  # nothing yet (vLLM's chunked-prefill case)
        choice: dict[str, Any] = {
            "index": i,
            "text": text,
            "logprobs": None,
            "finish_reason": d.finish_reason,
            "stop_reason": d.stop_reason,
        }
        if body.shown_logprobs is not None:
            choice["logprobs"], offsets[i] = completion_logprobs(
                token_ids,
                positions or [],
                body.shown_logprobs,
                self._decode_one,
                offsets[i],
                as_ids=self.as_ids,
            )
        if body.return_token_ids:
            choice["prompt_token_ids"] = d.prompt_token_ids
            choice["token_ids"] = d.token_ids
        return choice

    # ---- whole ------------------------------------------------------------------------------------

    async def response(self) -> dict[str, Any]:
        """Read every stream to its end and build the `text_completion` body."""
        logs = [ChoiceLog() for _ in range(self.num_choices)]
        prompt_logprobs: list[list[TokenLogprobs | None] | None] = [None] * len(self.streams)
        usages: list[TextUsage | None] = [None] * len(self.streams)
        kv_transfer_params: dict[str, Any] | None = None
        reason: str | None = None
        last: str | None = None
        try:
            async for p, d in self.merged:
                check_finish(d.finish_reason)
                self.metrics.tokens(len(d.token_ids))
                last = d.finish_reason or last
                logs[p * self.n + d.index].add(
                    d.text, d.token_ids, d.logprobs, d.finish_reason, d.stop_reason
                )
                if d.prompt_logprobs is not None and prompt_logprobs[p] is None:
                    prompt_logprobs[p] = d.prompt_logprobs
                if d.usage is not None:
                    usages[p] = d.usage
                if p == 0 and d.kv_transfer_params is not None:
                    kv_transfer_params = d.kv_transfer_params
            reason = last
        finally:
            await close_shielded(self.merged)
            self.metrics.finish(reason)
        choices = [
            self._choice(p * self.n + j, p, logs[p * self.n + j], prompt_logprobs[p])
            for p in range(len(self.streams))
            for j in range(self.n)
        ]
        usage = usage_of(
            [u or self._fallback_usage(p, logs) for p, u in enumerate(usages)],
            details=self.options.prompt_tokens_details,
        )
        return {
            **self._envelope(choices, usage=usage),
            "service_tier": None,
            "system_fingerprint": self.fingerprint,
            "kv_transfer_params": kv_transfer_params,
        }

    def _choice(
        self, i: int, p: int, log: ChoiceLog, prompt_logprobs: list[TokenLogprobs | None] | None
    ) -> dict[str, Any]:
        body = self.body
        text, token_ids = log.text, log.token_ids
        positions: Sequence[TokenLogprobs | None] | None = log.logprobs
        if body.echo:
            text, token_ids, positions = self._echoed(p, text, token_ids, positions, prompt_logprobs)
        logprobs = None
        if body.shown_logprobs is not None:
            logprobs, _ = completion_logprobs(
                token_ids, positions or [], body.shown_logprobs, self._decode_one, as_ids=self.as_ids
            )
        return_ids = bool(body.return_token_ids)
        return {
            "index": i,
            "text": text,
            "logprobs": logprobs,
            "finish_reason": log.finish_reason,
            "stop_reason": log.stop_reason,
            "token_ids": log.token_ids if return_ids else None,
            # whatever the engine computed, as vLLM's (echo with logprobs asks for them too)
            "prompt_logprobs": prompt_logprobs_json(prompt_logprobs),
            "prompt_token_ids": self.streams[p].prompt_token_ids if return_ids else None,
        }

    def _fallback_usage(self, p: int, logs: list[ChoiceLog]) -> TextUsage:
        tokens = sum(len(logs[p * self.n + j].token_ids) for j in range(self.n))
        return TextUsage(prompt_tokens=len(self.streams[p].prompt_token_ids), completion_tokens=tokens)

    # ---- shared -----------------------------------------------------------------------------------

    def _envelope(self, choices: list[dict[str, Any]], *, usage: dict[str, Any] | None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.request_id,
            "object": "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            out["usage"] = usage
        return out

    def _echoed(
        self,
        p: int,
        text: str,
        token_ids: list[int],
        positions: Sequence[TokenLogprobs | None] | None,
        prompt_logprobs: Sequence[TokenLogprobs | None] | None,
    ) -> tuple[str, list[int], Sequence[TokenLogprobs | None] | None]:
        """The choice with its prompt in front (only the prompt when max_tokens was 0), as vLLM's echo."""
        prompt_ids = self.streams[p].prompt_token_ids
        prompt = self.prompts[p]
        prompt_text = "" if self.body.return_token_ids else self._prompt_text(prompt)
        if self.body.max_tokens == 0:
            return prompt_text, list(prompt_ids), prompt_logprobs
        merged = (
            None
            if positions is None and prompt_logprobs is None
            else [*(prompt_logprobs or ()), *(positions or ())]
        )
        return prompt_text + text, [*prompt_ids, *token_ids], merged

    def _prompt_text(self, prompt: str | list[int]) -> str:
        if isinstance(prompt, str):
            return prompt
        return self.text.decode(prompt, skip_special_tokens=False)

    def _decode_one(self, token_id: int) -> str:
        return self.text.decode([token_id], skip_special_tokens=False)
