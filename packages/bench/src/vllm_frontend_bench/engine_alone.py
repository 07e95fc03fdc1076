"""B3e: the engine alone, the most output tokens/s any frontend could get from this engine on this machine.

An `EngineCoreLlm` with the worker's own engine settings (`vllm-frontend serve`'s parsing of the same
flags) runs in the load generator's process and takes the load with no frontend at all: no HTTP, no
detokenizer, no chat deltas. Each request is the load generator's chat request rendered by our chat
layer (the model's chat template) and lowered by our text layer (the generation config's defaults), so
the engine gets the engine request our worker sends it for the same HTTP request (a test checks it);
each stream is read to its end and its tokens counted. TTFT is the time to the first output with tokens,
ITL the gap between outputs, as this process sees them.

The engine starts before the measurement, with this process's affinity then, as a worker's does; while
it is measured this process runs where the load generator runs (off the engine's CPUs, where our
frontend keeps itself). The engine core and the forward pass are placed by vLLM, as under any server.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vllm_frontend_bench.loadgen import Load, LoadStats, RequestTiming, load_stats, user_message
from vllm_llm import (
    ChatLlm,
    ChatMessage,
    ChatRequest,
    EngineCoreLlm,
    Llm,
    LlmError,
    TextLlm,
    TextRequest,
    TextSamplingParams,
)
from vllm_llm.wire import GenerateRequest
from vllm_server.cli import serve_config

_ids = itertools.count()


def engine_request(chat: ChatLlm, load: Load, i: int) -> GenerateRequest:
    """The engine request of the load generator's request `i`: rendered, tokenized and lowered by our
    chat and text layers, as our worker does it."""
    params = TextSamplingParams(max_tokens=load.max_tokens, ignore_eos=True)
    rendered = chat.render(
        ChatRequest(
            request_id="", messages=[ChatMessage(role="user", content=user_message(i))], params=params
        )
    )
    request_id = f"engine-alone-{next(_ids)}"
    (lowered,) = chat.text.lower(
        TextRequest(request_id=request_id, prompt=rendered.prompt_token_ids, params=params)
    )
    return lowered


async def run_engine_load(llm: Llm, chat: ChatLlm, load: Load) -> LoadStats:
    """`load` straight to `llm`: `load.concurrency` streams at a time take the requests from one queue,
    each read to its end. A request that fails (an `LlmError`) counts as failed; the load goes on."""
    queue = iter(range(load.num_requests))
    timings: list[RequestTiming] = []
    failures: list[BaseException] = []

    async def one(i: int) -> None:
        timing = RequestTiming(start=time.perf_counter())
        try:
            stream = await llm.generate(engine_request(chat, load, i))
            async with stream:
                async for output in stream:
                    if output.token_ids:
                        timing.chunks.append(time.perf_counter())
                        timing.completion_tokens += len(output.token_ids)
        except LlmError as exc:
            failures.append(exc)
            return
        timing.end = time.perf_counter()
        timings.append(timing)

    async def stream_after_stream() -> None:
        for i in queue:
            await one(i)

    start = time.perf_counter()
    await asyncio.gather(*(stream_after_stream() for _ in range(load.concurrency)))
    return load_stats(timings, time.perf_counter() - start, failures)


@dataclass(slots=True)
class EngineAlone:
    """An engine core in this process with the chat layer that renders its requests."""

    llm: EngineCoreLlm
    chat: ChatLlm

    async def run(self, load: Load) -> LoadStats:
        """Take `load` with no frontend (see the module docstring)."""
        return await run_engine_load(self.llm, self.chat, load)

    async def stop(self) -> None:
        """Shut the engine down."""
        await self.llm.shutdown()


async def start_engine_alone(
    model_dir: Path, served_model_name: str, engine_flags: Sequence[str]
) -> EngineAlone:
    """An engine with the settings `vllm-frontend serve --model model_dir *engine_flags` gives its own."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # as every server of the bench gets it
    config = serve_config(
        ["--model", str(model_dir), "--served-model-name", served_model_name, *engine_flags]
    )
    assert config.engine_core is not None
    llm = EngineCoreLlm(config.engine_core.settings)
    try:
        await llm.start()
        return EngineAlone(llm, ChatLlm(TextLlm(llm)))
    except BaseException:
        await llm.shutdown()
        raise
