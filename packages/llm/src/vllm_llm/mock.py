"""`MockLlm`: a deterministic fake engine that honours the `Llm` contract, fast enough for benchmarks.

Tokens are derived from the prompt (`MockLlm.token_at`). Like vLLM's scheduler it stops on the eos token
(unless ignore_eos), on stop token ids (stop_reason = the id), at max_tokens or max_model_len (length),
and masks every stop token before min_tokens. A step loop emits one token per running request per step,
for at most `max_batch` requests, every `step_interval` seconds (0: flat out). Outputs are paced by the
stream interval like EngineCoreLlm's (`stream_interval`, raised per request by the sampling parameter).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from vllm_llm._channel import OutputChannel
from vllm_llm._errors import EngineDead, InvalidRequest, PromptTooLong, Unavailable
from vllm_llm._interface import Llm
from vllm_llm._pacing import StreamPacer, effective_interval
from vllm_llm._stream import GenerateStream
from vllm_llm.watch import Watch, WatchSender
from vllm_llm.wire import (
    WIRE_REVISION,
    FinishReason,
    GenerateOutput,
    GenerateRequest,
    LlmInfo,
    LogprobRow,
    ModelDtype,
    PromptInfo,
    SamplingParams,
)

MAX_LOGPROBS = 20


def default_info() -> LlmInfo:
    """The LlmInfo of a MockLlm with no tokenizer."""
    return LlmInfo(
        model="mock",
        served_model_name="mock",
        tokenizer="",
        dtype=ModelDtype.FLOAT32,
        max_model_len=4096,
        vocab_size=32000,
        eos_token_id=2,
        wire_revision=WIRE_REVISION,
    )


@dataclass(slots=True)
class _Running:
    request: GenerateRequest
    channel: OutputChannel
    pacer: StreamPacer
    produced: list[int] = field(default_factory=list)
    started: bool = False


class MockLlm(Llm):
    """A deterministic in-process `Llm` (see the module docstring)."""

    def __init__(
        self,
        *,
        info: LlmInfo | None = None,
        step_interval: float = 0.0,
        max_batch: int = 1 << 30,
        first_token_id: int = 16,
        coalesce: bool = True,
        stream_interval: int = 1,
    ) -> None:
        self._info = info or default_info()
        self.step_interval = step_interval
        self.max_batch = max_batch
        self.first_token_id = first_token_id
        self._coalesce = coalesce
        self.stream_interval = stream_interval
        self._health = WatchSender(True)
        self._ready = WatchSender(True)
        self._running: dict[int, _Running] = {}
        self._num_running = WatchSender(0)
        self._by_external: dict[str, set[int]] = {}
        self._ids = itertools.count()
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._paused = False
        self._shut_down = False
        #: A token sequence every request replays instead of the derived tokens, then the eos token
        #: (tests script a model's output, e.g. a tool call; max_tokens and stops still apply).
        self.script: Sequence[int] | None = None
        #: Every request received, in order (after validation).
        self.requests: list[GenerateRequest] = []
        #: External ids of every request aborted by `abort` or by closing its stream.
        self.aborted: list[str] = []

    # ---- the Llm interface ------------------------------------------------------------------------

    def info(self) -> LlmInfo:
        """The configured LlmInfo."""
        return self._info

    def subscribe_health(self) -> Watch[bool]:
        """True until `fail()`."""
        return self._health.subscribe()

    def subscribe_readiness(self) -> Watch[bool]:
        """False while paused, failed or shut down."""
        return self._ready.subscribe()

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Validate and start a request."""
        self._check_alive()
        self._validate(request)
        self.requests.append(request)
        if request.abort_immediately:  # as the engine: only a KV connector's release, nothing runs
            aborted = GenerateOutput(
                request_id=request.request_id, token_ids=[], finish_reason=FinishReason.ABORT
            )
            return GenerateStream.of_final(aborted)
        internal = next(self._ids)
        channel = OutputChannel(coalesce=self._coalesce)
        pacer = StreamPacer(effective_interval(request.sampling_params.stream_interval, self.stream_interval))
        self._running[internal] = _Running(request, channel, pacer)
        self._num_running.send(len(self._running))
        self._by_external.setdefault(request.request_id, set()).add(internal)
        self._ensure_loop()

        async def on_abort() -> None:
            self._abort_internal(internal)

        return GenerateStream(request.request_id, channel, on_abort)

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort by external id: each stream ends with an abort output."""
        for rid in request_ids:
            for internal in list(self._by_external.get(rid, ())):
                self._abort_internal(internal)

    async def shutdown(self) -> None:
        """Stop the step loop; open streams fail with Unavailable."""
        self._shut_down = True
        self._ready.send(False)
        if self._loop_task is not None:
            self._loop_task.cancel()
        for internal in list(self._running):
            self._finish(internal).channel.fail(Unavailable("the Llm was shut down"))

    # ---- controls for tests and benchmarks -------------------------------------------------------

    def pause(self) -> None:
        """Stop stepping; readiness turns false. Requests are kept."""
        self._paused = True
        self._ready.send(False)

    def resume(self) -> None:
        """Resume stepping; readiness turns true."""
        self._paused = False
        if self._health.value and not self._shut_down:
            self._ready.send(True)
        self._wakeup.set()

    def fail(self, message: str = "the mock engine failed") -> None:
        """A permanent failure: health false for good; open streams and later calls raise EngineDead."""
        self._health.send(False)
        self._ready.send(False)
        for internal in list(self._running):
            self._finish(internal).channel.fail(EngineDead(message))

    @property
    def num_running(self) -> int:
        """Requests in flight (the engine's state)."""
        return len(self._running)

    def subscribe_running(self) -> Watch[int]:
        """The number of requests in flight, watchable (e.g. to wait until an abort arrived)."""
        return self._num_running.subscribe()

    def token_at(self, prompt_token_ids: Sequence[int], index: int) -> int:
        """The unmasked token the mock produces at output position `index` for a prompt."""
        low = self.first_token_id
        span = max(1, self._info.vocab_size - low)
        seed = (sum(prompt_token_ids) * 1_000_003 + len(prompt_token_ids) * 7919) % span
        return low + (seed + index * 7919) % span

    # ---- internals ---------------------------------------------------------------------------------

    def _check_alive(self) -> None:
        if not self._health.value:
            raise EngineDead("the mock engine failed")
        if self._shut_down:
            raise Unavailable("the Llm was shut down")

    def _validate(self, request: GenerateRequest) -> None:
        info = self._info
        prompt = request.prompt_token_ids
        if not prompt:
            raise InvalidRequest(
                f"request {request.request_id!r} has an empty prompt", param="prompt_token_ids"
            )
        if any(t < 0 or t >= info.vocab_size for t in prompt):
            raise InvalidRequest(
                f"prompt token ids must be in [0, {info.vocab_size})", param="prompt_token_ids"
            )
        if len(prompt) >= info.max_model_len:
            raise PromptTooLong(max_model_len=info.max_model_len, prompt_len=len(prompt))
        sp = request.sampling_params
        if sp.max_tokens is not None and sp.max_tokens < 1:
            raise InvalidRequest(f"max_tokens must be at least 1, got {sp.max_tokens}", param="max_tokens")
        if sp.min_tokens < 0 or (sp.max_tokens is not None and sp.min_tokens > sp.max_tokens):
            raise InvalidRequest(
                f"min_tokens must be in [0, max_tokens], got {sp.min_tokens}", param="min_tokens"
            )
        for name, k in (("logprobs", sp.logprobs), ("prompt_logprobs", sp.prompt_logprobs)):
            if k is not None and not -1 <= k <= MAX_LOGPROBS:
                raise InvalidRequest(f"{name} must be in [-1, {MAX_LOGPROBS}], got {k}", param=name)
        if sp.stream_interval is not None and sp.stream_interval < 1:
            raise InvalidRequest(
                f"stream_interval must be at least 1, got {sp.stream_interval}", param="stream_interval"
            )
        if sp.temperature < 0:
            raise InvalidRequest(
                f"temperature must be non-negative, got {sp.temperature}", param="temperature"
            )
        if not 0 < sp.top_p <= 1:
            raise InvalidRequest(f"top_p must be in (0, 1], got {sp.top_p}", param="top_p")
        rank = request.data_parallel_rank
        if rank is not None and not 0 <= rank < info.data_parallel_size:
            raise InvalidRequest(
                f"data_parallel_rank {rank} is out of range [0, {info.data_parallel_size})",
                param="data_parallel_rank",
            )
        if request.lora_request is not None and not info.supports_lora:
            raise InvalidRequest("LoRA is not enabled", param="lora_request")

    def _ensure_loop(self) -> None:
        self._wakeup.set()
        if self._loop_task is None or self._loop_task.done():
            self._loop_task = asyncio.get_running_loop().create_task(self._step_loop())

    async def _step_loop(self) -> None:
        next_step = time.monotonic()
        while True:
            if not self._running or self._paused:
                self._wakeup.clear()
                await self._wakeup.wait()
                next_step = time.monotonic()
                continue
            batch = list(itertools.islice(self._running.items(), self.max_batch))
            for internal, running in batch:
                self._step(internal, running)
            if self.step_interval > 0:
                next_step += self.step_interval
                await asyncio.sleep(max(0.0, next_step - time.monotonic()))
            else:
                await asyncio.sleep(0)

    def _step(self, internal: int, running: _Running) -> None:
        request = running.request
        sp = request.sampling_params
        prompt = request.prompt_token_ids
        index = len(running.produced)
        token = self._sample(prompt, index, sp)
        running.produced.append(token)
        finish, stop_reason = self._check_stop(request, running, token)
        out = GenerateOutput(
            request_id=request.request_id,
            token_ids=[token],
            logprobs=[_row(token, sp.logprobs)] if sp.logprobs is not None else None,
            finish_reason=finish,
            stop_reason=stop_reason,
            kv_transfer_params=request.kv_transfer_params if finish is not None else None,
        )
        if not running.started:
            running.started = True
            out.prompt_info = PromptInfo(
                num_prompt_tokens=len(prompt),
                prompt_logprobs=[_row(t, sp.prompt_logprobs) for t in prompt[1:]]
                if sp.prompt_logprobs is not None
                else None,
            )
        if finish is not None:
            self._finish(internal)
        paced = running.pacer.pace(out)
        if paced is not None:
            running.channel.put(paced)

    def _sample(self, prompt: Sequence[int], index: int, sp: SamplingParams) -> int:
        script = self.script
        if script is not None:
            if index < len(script):
                return script[index]
            eos = sp.eos_token_id if sp.eos_token_id is not None else self._info.eos_token_id
            return eos if eos is not None else self.token_at(prompt, index)
        token = self.token_at(prompt, index)
        if index < sp.min_tokens:
            masked = set(sp.all_stop_token_ids or ()) | set(sp.stop_token_ids or ())
            if sp.eos_token_id is not None:
                masked.add(sp.eos_token_id)
            while token in masked:
                token = self.first_token_id + (token + 1 - self.first_token_id) % max(
                    1, self._info.vocab_size - self.first_token_id
                )
        return token

    def _check_stop(
        self, request: GenerateRequest, running: _Running, token: int
    ) -> tuple[FinishReason | None, int | str | None]:
        sp = request.sampling_params
        if sp.eos_token_id is not None and not sp.ignore_eos and token == sp.eos_token_id:
            return FinishReason.STOP, None
        if token in (sp.stop_token_ids or ()):
            return FinishReason.STOP, token
        produced = len(running.produced)
        max_tokens = sp.max_tokens if sp.max_tokens is not None else self._info.max_model_len
        if len(request.prompt_token_ids) + produced >= self._info.max_model_len or produced >= max_tokens:
            return FinishReason.LENGTH, None
        return None, None

    def _finish(self, internal: int) -> _Running:
        running = self._running.pop(internal)
        self._num_running.send(len(self._running))
        ext = running.request.request_id
        ids = self._by_external.get(ext)
        if ids is not None:
            ids.discard(internal)
            if not ids:
                del self._by_external[ext]
        return running

    def _abort_internal(self, internal: int) -> None:
        if internal not in self._running:
            return
        running = self._finish(internal)
        self.aborted.append(running.request.request_id)
        held = running.pacer.flush()
        if held is not None:
            running.channel.put(held)
        running.channel.put(
            GenerateOutput(
                request_id=running.request.request_id, token_ids=[], finish_reason=FinishReason.ABORT
            )
        )


def _row(token: int, k: int | None) -> LogprobRow:
    n = 5 if k is None or k < 0 else k
    top = [token + j for j in range(n)]
    return LogprobRow(
        token_ids=[token, *top],
        logprobs=[-0.25, *(-0.25 - j for j in range(n))],
        rank=1,
    )
