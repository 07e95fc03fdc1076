"""`EngineCoreLlm`: an `Llm` over a real vLLM engine core (vLLM's async multiprocess engine-core client).

vLLM and torch are imported lazily (in `start()`), so `vllm_llm` imports without them. The engine
starts in a worker thread (the client's constructor blocks until every engine reported ready);
readiness stays false until then. One output loop demultiplexes `EngineCoreOutputs` into per-request
channels; external request ids map to randomized internal ids, so duplicate external ids may be in
flight together. The engine sends nothing for a client abort, so the final ABORT output is synthesized
here. Health is true until the engine dies, then false for good.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from vllm_llm._channel import OutputChannel
from vllm_llm._errors import (
    ADMISSION_REASONS,
    AdmissionReason,
    AdmissionRefused,
    EngineDead,
    InvalidRequest,
    LlmError,
    Unavailable,
)
from vllm_llm._interface import Llm
from vllm_llm._pacing import effective_interval
from vllm_llm._stream import GenerateStream
from vllm_llm.engine_core._settings import EngineCoreSettings
from vllm_llm.engine_core._stats import PROMPT_TOKEN_SOURCES, EngineCounters, EngineStats, IterationObserver
from vllm_llm.watch import Watch, WatchSender
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest, LlmInfo, LoraRequest

if TYPE_CHECKING:
    from vllm_llm.engine_core._lowering import Lowering
    from vllm_llm.engine_core._outputs import RequestState
    from vllm_llm.engine_core._stat_log import StatLog

logger = logging.getLogger(__name__)

PauseMode = Literal["abort", "wait", "keep"]

__all__ = ["PROMPT_TOKEN_SOURCES", "EngineCoreLlm", "EngineCounters", "IterationObserver", "PauseMode"]


class EngineCoreLlm(Llm):
    """An `Llm` over vLLM's engine core. Call (and await) `start()` before generating."""

    def __init__(self, settings: EngineCoreSettings) -> None:
        self.settings = settings
        self._health = WatchSender(True)
        self._ready = WatchSender(False)
        self._client: Any = None
        self._vllm_config: Any = None
        self._lowering: Lowering | None = None
        self._info: LlmInfo | None = None
        self._requests: dict[str, tuple[RequestState, OutputChannel]] = {}
        self._by_external: dict[str, set[str]] = {}
        self._output_task: asyncio.Task[None] | None = None
        self._start_task: asyncio.Task[None] | None = None
        self._dead: EngineDead | None = None
        self._stats = EngineStats()
        #: vLLM's logging stat logger per engine (stats on, its logger at INFO), as AsyncLLM keeps it.
        self._stat_log: StatLog | None = None
        self._count_nans = False
        self._paused = False
        self._sleeping = False
        self._sleep_level = 0
        self._shut_down = False
        #: vLLM's queue limits (``--max-num-queued-reqs``, ``--max-num-queued-tokens``), known once started;
        #: vLLM enforces them in its frontend, not in the engine core, so this Llm does.
        self._max_queued_reqs: int | None = None
        self._max_queued_tokens: int | None = None
        self._admission_rejections = dict.fromkeys(ADMISSION_REASONS, 0)

    # ---- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the engines without blocking the event loop; readiness turns true when they are ready."""
        if self._start_task is None:
            self._start_task = asyncio.get_running_loop().create_task(self._start())
        await asyncio.shield(self._start_task)

    async def _start(self) -> None:
        try:
            client, vllm_config, tokenizer, info = await asyncio.to_thread(self._build)
        except BaseException as exc:
            self._mark_dead(f"the engine failed to start: {exc}")
            raise
        from vllm_llm.engine_core._lowering import Lowering

        self._client = client
        self._vllm_config = vllm_config
        self._max_queued_reqs = vllm_config.scheduler_config.max_num_queued_reqs
        self._max_queued_tokens = vllm_config.scheduler_config.max_num_queued_tokens
        lora_config = vllm_config.lora_config
        observer = self._stats.iteration_observer
        self._stats = EngineStats(max_loras=lora_config.max_loras if lora_config is not None else None)
        self._stats.iteration_observer = observer
        self._lowering = Lowering(vllm_config, tokenizer)
        self._info = info
        if self.settings.log_stats:
            from vllm_llm.engine_core import _stat_log

            self._count_nans = _stat_log.compute_nans()
            if _stat_log.stat_log_enabled():
                self._stat_log = _stat_log.StatLog(vllm_config, self.engine_indexes)
                self._lowering.multimodal.record_requests()
        if self._shut_down:
            await _shutdown_client(client)
            return
        self._output_task = asyncio.get_running_loop().create_task(self._output_loop())
        self._ready.send(True)

    def _build(self) -> tuple[Any, Any, Any, LlmInfo]:
        from vllm.tokenizers import cached_tokenizer_from_config
        from vllm.v1.engine.core_client import EngineCoreClient
        from vllm.v1.executor.abstract import Executor

        from vllm_llm.engine_core._info import llm_info
        from vllm_llm.engine_core._parent_watch import announce_parent
        from vllm_llm.engine_core._vision_compat import install_for_children

        install_for_children()  # the start-up hook in vLLM's spawned interpreters (see there)
        announce_parent()  # which ends an engine core whose frontend died (see there)
        vllm_config = self.settings.engine_config()
        executor_class = Executor.get_class(vllm_config)
        client = EngineCoreClient.make_async_mp_client(vllm_config, executor_class, self.settings.log_stats)
        tokenizer = cached_tokenizer_from_config(vllm_config.model_config)
        return client, vllm_config, tokenizer, llm_info(self.settings, vllm_config, tokenizer)

    async def shutdown(self) -> None:
        """Stop the engines; open streams fail with Unavailable."""
        self._shut_down = True
        self._ready.send(False)
        if self._output_task is not None:
            self._output_task.cancel()
        self._fail_all(Unavailable("the engine was shut down"))
        client, self._client = self._client, None
        if client is not None:
            await _shutdown_client(client)

    # ---- the Llm interface ------------------------------------------------------------------------

    def info(self) -> LlmInfo:
        """Model facts from the engine's configuration and ready responses."""
        if self._info is None:
            raise Unavailable("the engine has not started yet")
        return self._info

    def subscribe_health(self) -> Watch[bool]:
        """True until the engine dies."""
        return self._health.subscribe()

    def subscribe_readiness(self) -> Watch[bool]:
        """True once started, while not paused, asleep, dead or shut down."""
        return self._ready.subscribe()

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Lower, validate and submit a request."""
        client = self._require_client()
        assert self._lowering is not None
        internal = self._internal_id(request.request_id)
        try:
            self._admit(request)
            engine_request = self._lowering.lower(request, internal)
        except LlmError:
            await self._release_remote_prefill(request, internal)
            raise
        from vllm_llm.engine_core._outputs import RequestState

        channel = OutputChannel()
        interval = effective_interval(request.sampling_params.stream_interval, self.settings.stream_interval)
        lora = request.lora_request
        state = RequestState(
            request.request_id,
            len(request.prompt_token_ids),
            interval,
            log_stats=self.settings.log_stats,
            lora_name=lora.lora_name if lora is not None else None,
        )
        self._requests[internal] = (state, channel)
        self._by_external.setdefault(request.request_id, set()).add(internal)
        try:
            await client.add_request_async(engine_request)
        except BaseException as exc:
            self._forget(internal)
            raise self._translate(exc) from exc
        if request.abort_immediately:
            # The engine adds and aborts it at once (only its KV connector's release runs) and, as for any
            # client abort, sends nothing: the stream's ABORT output is made here.
            self._forget(internal)
            channel.put(
                GenerateOutput(request_id=request.request_id, token_ids=[], finish_reason=FinishReason.ABORT)
            )

        async def on_abort() -> None:
            await self._abort_internal([internal])

        return GenerateStream(request.request_id, channel, on_abort)

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort by external id; each stream ends with a synthesized ABORT output."""
        internal = [i for rid in request_ids for i in self._by_external.get(rid, ())]
        await self._abort_internal(internal)

    def _admit(self, request: GenerateRequest) -> None:
        """Refuse `request` when a queue limit is reached, as vLLM's frontend does (AsyncLLM.check_admission):
        in flight plus its `admission_n` sequences over ``max_num_queued_reqs``, or the prompt tokens of the
        requests still prefilling at or over ``max_num_queued_tokens``. A choice admitted with the first
        (`admission_n` 0) is never refused alone."""
        n = request.admission_n
        if n <= 0:
            return
        limit = self._max_queued_reqs
        current = len(self._requests)
        if limit is not None and current + n > limit:
            self._refuse(request, "max_num_queued_reqs", f"{current} in flight, n={n}, max={limit}")
        limit = self._max_queued_tokens
        if limit is not None:
            backlog = self.num_queued_tokens
            if backlog >= limit:
                self._refuse(request, "max_num_queued_tokens", f"{backlog} prompt tokens queued, max={limit}")

    def _refuse(self, request: GenerateRequest, reason: AdmissionReason, detail: str) -> None:
        logger.debug("rejecting request %s by %s (%s)", request.request_id, reason, detail)
        self._admission_rejections[reason] += 1
        raise AdmissionRefused(reason)

    # ---- engine-core control operations -------------------------------------------------------------

    async def pause(self, *, mode: PauseMode = "abort", clear_cache: bool = True) -> None:
        """Pause the scheduler; readiness turns false."""
        self._paused = True
        self._update_readiness()
        await self._call(self._require_client().pause_scheduler_async(mode=mode, clear_cache=clear_cache))

    async def resume(self) -> None:
        """Resume the scheduler; readiness turns true again."""
        await self._call(self._require_client().resume_scheduler_async())
        self._paused = False
        self._update_readiness()

    async def is_paused(self) -> bool:
        """Whether the scheduler is paused (consensus over the engines)."""
        return bool(await self._call(self._require_client().is_scheduler_paused_async()))

    async def sleep(self, *, level: int = 1, mode: PauseMode = "abort") -> None:
        """Put the engines to sleep; readiness turns false."""
        self._sleeping = True
        self._sleep_level = level
        self._update_readiness()
        await self._call(self._require_client().sleep_async(level, mode))

    async def wake_up(self, tags: list[str] | None = None) -> None:
        """Wake the engines (all of them, or the given tags)."""
        await self._call(self._require_client().wake_up_async(tags))
        self._sleeping = bool(await self.is_sleeping())
        if not self._sleeping:
            self._sleep_level = 0
        self._update_readiness()

    async def is_sleeping(self) -> bool:
        """Whether the engines sleep."""
        return bool(await self._call(self._require_client().is_sleeping_async()))

    async def reset_prefix_cache(
        self, *, reset_running_requests: bool = False, reset_connector: bool = False
    ) -> bool:
        """Reset the prefix cache of every engine; true if all succeeded."""
        client = self._require_client()
        return bool(
            await self._call(client.reset_prefix_cache_async(reset_running_requests, reset_connector))
        )

    async def add_lora(self, lora: LoraRequest) -> bool:
        """Load a LoRA adapter."""
        from vllm_llm.engine_core._lowering import Lowering

        vllm_lora = Lowering.lora_request(lora)
        return bool(await self._call(self._require_client().add_lora_async(vllm_lora)))

    async def remove_lora(self, lora_int_id: int) -> bool:
        """Unload a LoRA adapter."""
        return bool(await self._call(self._require_client().remove_lora_async(lora_int_id)))

    async def list_loras(self) -> list[int]:
        """Ids of the loaded LoRA adapters."""
        return sorted(await self._call(self._require_client().list_loras_async()))

    async def collective_rpc(
        self,
        method: str,
        *,
        rpc_timeout: float | None = None,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> list[Any]:
        """Call `method` on every worker; one result per worker."""
        client = self._require_client()
        return list(await self._call(client.collective_rpc_async(method, rpc_timeout, args, kwargs)))

    async def profile(self, *, is_start: bool, prefix: str | None = None) -> None:
        """Start or stop the torch profiler on every worker (needs a configured profiler)."""
        await self._call(self._require_client().profile_async(is_start, prefix))

    def kv_event_sources(self) -> dict[int, dict[str, Any]]:
        """The KV-cache event publishers of the engines, keyed by data-parallel rank."""
        sources = self._require_client().get_kv_event_sources()
        return {int(rank): _as_dict(cfg) for rank, cfg in sources.items()}

    def prefix_cache_totals(self) -> tuple[int, int]:
        """Prompt tokens looked up in the prefix cache, and found there, over all engines since start
        (vLLM's ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``; needs `log_stats`)."""
        counters = self._stats.counters.values()
        return sum(c.prefix_cache_queries for c in counters), sum(c.prefix_cache_hits for c in counters)

    def prompt_tokens_by_source(self) -> dict[str, int]:
        """Prompt tokens since start by where their KV came from, as vLLM's ``vllm:prompt_tokens_by_source``
        counts them: ``local_compute``, ``local_cache_hit``, ``external_kv_transfer`` (a KV connector)."""
        totals = [0, 0, 0]
        for c in self._stats.counters.values():
            for i, n in enumerate(c.prompt_tokens_by_source):
                totals[i] += n
        return dict(zip(PROMPT_TOKEN_SOURCES, totals, strict=True))

    @property
    def log_stats(self) -> bool:
        """Whether the engines send stats (vLLM's ``--disable-log-stats`` unset)."""
        return self.settings.log_stats

    @property
    def counts_nans(self) -> bool:
        """Whether the engines count NaNs in logits and this counts the requests that met one (stats on and
        ``VLLM_COMPUTE_NANS_IN_LOGITS``: vLLM's ``vllm:corrupted_requests``); known once started."""
        return self._count_nans

    @property
    def stat_log_interval(self) -> float | None:
        """Seconds between two `do_log_stats` calls as vLLM's server makes them (``VLLM_LOG_STATS_INTERVAL``),
        or None when there is nothing to log: stats off, or vLLM's stat-logging logger below INFO (then
        vLLM makes no logging stat logger either)."""
        if self._stat_log is None:
            return None
        from vllm_llm.engine_core._stat_log import stat_log_interval

        return stat_log_interval()

    async def do_log_stats(self) -> None:
        """Log vLLM's stats line of each engine for the interval since the last call (AsyncLLM's
        ``do_log_stats``; a server calls it every `stat_log_interval` seconds)."""
        if self._stat_log is not None:
            self._stat_log.log()

    @property
    def engine_indexes(self) -> list[int]:
        """The engine indexes (data-parallel ranks) this client manages: vLLM's ``engine`` label values."""
        ranks = getattr(self._client, "engine_ranks_managed", None) if self._client is not None else None
        return [int(r) for r in ranks] if ranks else [0]

    def engine_counters(self) -> dict[int, EngineCounters]:
        """Per-engine counters since start (with `log_stats`), keyed by engine index."""
        return dict(self._stats.counters)

    def set_iteration_observer(self, observer: IterationObserver | None) -> None:
        """Call `observer(engine_index, tokens)` once per engine step that produced outputs (stats on)."""
        self._stats.iteration_observer = observer

    def lora_requests_info(self) -> tuple[int, dict[tuple[str, str], float]] | None:
        """vLLM's ``vllm:lora_requests_info``: the LoRA slots, and per (waiting, running) adapter-name list
        the wall time it was last seen; None without LoRA or stats."""
        if self._stats.max_loras is None or not self.settings.log_stats:
            return None
        return self._stats.max_loras, dict(self._stats.lora_info)

    def cache_config_info(self) -> dict[str, str] | None:
        """vLLM's ``vllm:cache_config_info`` labels (CacheConfig.metrics_info()); None before start."""
        if self._vllm_config is None:
            return None
        return dict(self._vllm_config.cache_config.metrics_info())

    @property
    def sleep_state(self) -> tuple[bool, int]:
        """Whether the engines sleep, and the level they were put to sleep at (0 when awake)."""
        return self._sleeping, self._sleep_level if self._sleeping else 0

    def multimodal_cache_stats(self) -> Any:
        """vLLM's sender-cache counters (CacheInfo: hits, total) since the last call; None without one."""
        return self._lowering.multimodal.cache_stats() if self._lowering is not None else None

    @property
    def scheduler_stats(self) -> dict[int, Any]:
        """The latest scheduler stats of each engine (with `log_stats`), keyed by engine index."""
        return dict(self._stats.scheduler)

    @property
    def num_queued_tokens(self) -> int:
        """Prompt tokens of the requests still prefilling (no output from the engine yet): the backlog
        ``max_num_queued_tokens`` bounds, counted as vLLM's OutputProcessor counts it (whole prompts)."""
        return sum(state.prompt_len for state, _ in self._requests.values() if state.prefilling)

    def admission_rejections(self) -> dict[AdmissionReason, int]:
        """Requests refused by each queue limit since start (vLLM's ``vllm:admission_rejections``)."""
        return dict(self._admission_rejections)

    @property
    def num_in_flight(self) -> int:
        """Requests this Llm tracks as running in the engine."""
        return len(self._requests)

    @property
    def engine_pids(self) -> list[int]:
        """Process ids of the engine-core processes (for tests and operators)."""
        client = self._require_client()
        return [int(p.pid) for p in client.resources.engine_manager.processes]

    @property
    def vllm_config(self) -> Any:
        """vLLM's configuration of the running engines."""
        self._require_client()
        return self._vllm_config

    # ---- internals ----------------------------------------------------------------------------------

    def _require_client(self) -> Any:
        if self._dead is not None:
            raise self._dead
        if self._shut_down:
            raise Unavailable("the engine was shut down")
        if self._client is None:
            raise Unavailable("the engine has not started yet")
        return self._client

    def _internal_id(self, external: str) -> str:
        if self.settings.randomize_request_ids:
            return f"{external}-{uuid.uuid4().hex[:8]}"
        if external in self._requests:
            raise InvalidRequest(f"request id {external!r} is already in flight", param="request_id")
        return external

    async def _call(self, awaitable: Any) -> Any:
        try:
            return await awaitable
        except BaseException as exc:
            raise self._translate(exc) from exc

    def _translate(self, exc: BaseException) -> BaseException:
        if isinstance(exc, LlmError | asyncio.CancelledError):
            return exc
        if self._dead is not None or type(exc).__name__ == "EngineDeadError":
            self._mark_dead(str(exc))
            assert self._dead is not None
            return self._dead
        return LlmError(f"engine call failed: {exc}")

    async def _output_loop(self) -> None:
        client = self._client
        stats = self._stats
        stat_log = self._stat_log
        count_nans = self._count_nans
        try:
            while True:
                outputs = await client.get_output_async()
                engine = outputs.engine_index
                if outputs.scheduler_stats is not None:
                    stats.scheduler_stats(engine, outputs.scheduler_stats)
                timestamp = outputs.timestamp
                iteration_tokens = 0
                preemptions = 0
                # vLLM's IterationStats of the batch, for its stats log only (what that log reads).
                iteration = stat_log.iteration() if stat_log is not None and outputs.outputs else None
                for o in outputs.outputs:
                    if o.mm_cache_miss_hashes and self._lowering is not None:
                        self._lowering.multimodal.invalidate(o.mm_cache_miss_hashes)
                    entry = self._requests.get(o.request_id)
                    if entry is None:
                        continue  # aborted here already
                    state, channel = entry
                    clock = state.clock
                    if clock is not None:  # stats on: vLLM's IterationStats.update_from_output
                        prefill = o.prefill_stats
                        if not clock.seen and prefill is not None:
                            stats.prefill(engine, prefill)
                            iteration_tokens += prefill.num_computed_tokens
                            if iteration is not None:
                                iteration.prompt_token_stats.update_from_output(prefill)
                        iteration_tokens += len(o.new_token_ids)
                        preemptions += clock.update(o, timestamp)
                        if o.events and state.lora_name is not None:
                            stats.lora_events(o.request_id, state.lora_name, o.events)
                        if count_nans and o.num_nans_in_logits > 0:
                            clock.corrupted = True
                        if clock.corrupted and o.finish_reason is not None:  # once, when it finishes
                            stats.engine(engine).corrupted_requests += 1
                            if iteration is not None:
                                iteration.num_corrupted_reqs += 1
                    out = state.convert(o)
                    if out is None:
                        continue
                    if out.finish_reason is not None:
                        self._forget(o.request_id)
                    channel.put(out)
                if outputs.outputs and self.settings.log_stats:
                    if preemptions:
                        stats.engine(engine).num_preemptions += preemptions
                    observer = stats.iteration_observer
                    if observer is not None:
                        observer(engine, iteration_tokens)
                if stat_log is not None:
                    if iteration is not None:
                        prompt_computed = iteration.prompt_token_stats.computed
                        iteration.num_generation_tokens = iteration_tokens - prompt_computed
                        iteration.num_preempted_reqs = preemptions
                    assert self._lowering is not None
                    mm_cache = self._lowering.multimodal.take_request_stats()
                    stat_log.record(engine, outputs.scheduler_stats, iteration, mm_cache)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            if not self._shut_down:
                logger.error("engine core output loop failed: %s", exc)
                self._mark_dead(f"the engine core died: {exc}")

    async def _release_remote_prefill(self, request: GenerateRequest, internal: str) -> None:
        """A decode request refused before reaching the engine still tells the KV connector, which frees
        the blocks a prefill worker holds for it (vLLM's notify_kv_transfer_request_rejected)."""
        kv = request.kv_transfer_params
        client = self._client
        if not kv or not kv.get("do_remote_prefill") or client is None or self._dead is not None:
            return
        from vllm.sampling_params import SamplingParams
        from vllm.v1.engine import EngineCoreRequest

        release = EngineCoreRequest(
            request_id=internal,
            prompt_token_ids=[0],
            mm_features=None,
            sampling_params=SamplingParams(max_tokens=1, extra_args={"kv_transfer_params": dict(kv)}),
            pooling_params=None,
            arrival_time=time.time(),
            lora_request=None,
            cache_salt=None,
            data_parallel_rank=None,
            abort_immediately=True,
        )
        try:
            await client.add_request_async(release)
        except Exception as exc:  # the engine may be dying; the prefill worker's lease frees the blocks
            logger.warning("release of the remote prefill of %s failed: %s", request.request_id, exc)

    async def _abort_internal(self, internal_ids: list[str]) -> None:
        live = [i for i in internal_ids if i in self._requests]
        if not live:
            return
        for internal in live:
            state, channel = self._forget(internal)
            held = state.pacer.flush()
            if held is not None:
                channel.put(held)  # tokens the stream interval held back are delivered, not lost
            channel.put(
                GenerateOutput(request_id=state.external_id, token_ids=[], finish_reason=FinishReason.ABORT)
            )
        if self._client is not None and self._dead is None:
            try:
                await self._client.abort_requests_async(live)
            except Exception as exc:  # the engine may be dying; its loop reports that
                logger.warning("abort of %s failed: %s", live, exc)

    def _forget(self, internal: str) -> tuple[RequestState, OutputChannel]:
        state, channel = self._requests.pop(internal)
        if state.lora_name is not None and state.clock is not None:
            self._stats.lora_finished(internal, state.lora_name)
        ids = self._by_external.get(state.external_id)
        if ids is not None:
            ids.discard(internal)
            if not ids:
                del self._by_external[state.external_id]
        return state, channel

    def _mark_dead(self, message: str) -> None:
        if self._dead is None:
            self._dead = EngineDead(message)
        self._health.send(False)
        self._ready.send(False)
        self._fail_all(self._dead)

    def _fail_all(self, error: BaseException) -> None:
        for internal in list(self._requests):
            _, channel = self._forget(internal)
            channel.fail(error)

    def _update_readiness(self) -> None:
        ready = (
            self._client is not None
            and self._dead is None
            and not self._shut_down
            and not self._paused
            and not self._sleeping
        )
        self._ready.send(ready)


async def _shutdown_client(client: Any) -> None:
    """Stop the engines (blocking, so in a thread), then release the client's ZMQ context.

    vLLM closes the client's sockets through a callback it queues on this loop and never terminates the
    context; terminate it once that callback has run, so no context outlives the client.
    """
    await asyncio.to_thread(client.shutdown)
    loop = asyncio.get_running_loop()
    closed = loop.create_future()
    loop.call_soon(closed.set_result, None)  # runs after vLLM's queued socket-closing callback
    await closed
    ctx = getattr(getattr(client, "resources", None), "ctx", None)
    if ctx is not None:
        ctx.destroy(linger=0)


def _as_dict(cfg: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return dataclasses.asdict(cfg)
    if hasattr(cfg, "model_dump"):
        return dict(cfg.model_dump())
    return dict(vars(cfg))
