"""`DisaggregatedLlm`: prefill/decode disaggregation over two `Llm`s — vLLM's own proxy flow.

Every request runs twice. The **prefill** leg goes to the prefill `Llm` with ``max_tokens`` 1 and
``kv_transfer_params = {"do_remote_decode": true, ...}``: the prefill worker computes the prompt's KV
cache, keeps its blocks for the decode side and answers the transfer handle (its engine id, block ids,
side-channel host and port) in the final output's ``kv_transfer_params``. The **decode** leg goes to the
decode `Llm` with those parameters: the decode worker's KV connector pulls the blocks and the stream it
returns is the client's. This is the flow of vLLM's
``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py``; both workers run vLLM's KV connector
(``--kv-transfer-config``), which does the transfer. Nothing here imports vLLM.

Blocks held for the decode side are released by the decode worker's read, or, when the decode worker
refuses the decode leg, by its KV connector (the worker tells it, as vLLM's serving layer does for a
request it rejects). When the decode leg reaches no decode engine at all, the prefill worker frees them
at the end of its lease (NixlConnector's ``kv_lease_duration``, 30 s by default). A release sent from
here instead could not tell a decode worker that never took the request from one that took it and may
still be reading the blocks (a deadline, a stall), and freeing blocks under a read corrupts the cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from vllm_llm._errors import InvalidRequest, LlmError
from vllm_llm._interface import Llm
from vllm_llm._stream import GenerateStream
from vllm_llm.watch import Watch, WatchSender
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest, LlmInfo, PromptInfo

#: The prefill leg's transfer parameters, as vLLM's proxy sends them: keep the blocks for a remote decode.
PREFILL_KV_TRANSFER_PARAMS: dict[str, Any] = {
    "do_remote_decode": True,
    "do_remote_prefill": False,
    "remote_engine_id": None,
    "remote_block_ids": None,
    "remote_host": None,
    "remote_port": None,
}


class IncompatibleWorkers(ValueError):
    """The prefill and decode `Llm`s do not serve the same model."""


def check_compatible(prefill: LlmInfo, decode: LlmInfo) -> None:
    """Raise `IncompatibleWorkers` unless a KV cache made by `prefill` can be decoded by `decode`."""
    # The connectors check the KV layout themselves (vLLM's NIXL compatibility hash); what differs
    # otherwise, such as max_model_len, the decode worker refuses per request, releasing the blocks.
    for name in ("model", "dtype", "vocab_size"):
        p, d = getattr(prefill, name), getattr(decode, name)
        if p != d:
            raise IncompatibleWorkers(
                f"the prefill workers serve {name}={p!r} and the decode workers {name}={d!r}: "
                "a KV cache moves only between workers of one model"
            )


class DisaggregatedLlm(Llm):
    """An `Llm` that prefills on one `Llm` and decodes on another; it owns both (shuts them down)."""

    def __init__(self, prefill: Llm, decode: Llm) -> None:
        self.prefill = prefill
        self.decode = decode
        self._ready = WatchSender(False)
        self._follow: asyncio.Task[None] | None = None
        #: Requests in their prefill leg (by external id, with a count: ids may repeat).
        self._prefilling: dict[str, int] = {}

    # ---- the Llm interface ------------------------------------------------------------------------

    def info(self) -> LlmInfo:
        """The decode side's LlmInfo: the model the client talks to."""
        return self.decode.info()

    async def refresh_info(self, within: float | None = 5.0) -> LlmInfo:
        """Re-read both sides' LlmInfo where they can (a RemoteLlm's workers change adapters at runtime)."""
        for llm in (self.prefill, self.decode):
            refresh = getattr(llm, "refresh_info", None)
            if refresh is not None:
                await refresh(within=within)
        return self.decode.info()

    def subscribe_health(self) -> Watch[bool]:
        """The decode side's liveness (a prefill side that fails makes requests fail, not this Llm)."""
        return self.decode.subscribe_health()

    def subscribe_readiness(self) -> Watch[bool]:
        """Ready while both sides are."""
        if self._follow is None:
            prefill, decode = self.prefill.subscribe_readiness(), self.decode.subscribe_readiness()
            self._ready.send(prefill.value and decode.value)
            self._follow = asyncio.get_running_loop().create_task(self._follow_readiness(prefill, decode))
        return self._ready.subscribe()

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Prefill `request` on the prefill side, then return its decode stream from the decode side."""
        if request.kv_transfer_params is not None:
            raise InvalidRequest(
                "kv_transfer_params are set by this server's prefill/decode disaggregation "
                "(--remote-prefill), not by the client",
                param="kv_transfer_params",
            )
        if request.abort_immediately:
            raise InvalidRequest(
                "abort_immediately has no KV transfer to release here", param="abort_immediately"
            )
        prefilled = await self._prefill(request)
        if prefilled.finish_reason == FinishReason.ABORT:
            return GenerateStream.of_final(
                GenerateOutput(request_id=request.request_id, token_ids=[], finish_reason=FinishReason.ABORT)
            )
        kv = prefilled.kv_transfer_params
        if kv is None:
            raise LlmError(
                "the prefill worker answered no kv_transfer_params: start the --remote-prefill workers "
                "with --kv-transfer-config (a KV connector)"
            )
        wp = request.sampling_params
        decode_request = msgspec.structs.replace(
            request,
            kv_transfer_params=kv,
            # the prefill leg computed the prompt's logprobs; the decode worker did not compute the prompt
            sampling_params=msgspec.structs.replace(wp, prompt_logprobs=None)
            if wp.prompt_logprobs is not None
            else wp,
        )
        stream = await self.decode.generate(decode_request)
        prompt_info = prefilled.prompt_info
        if wp.prompt_logprobs is None or prompt_info is None:
            return stream
        return GenerateStream(request.request_id, _with_prompt_info(stream, prompt_info), stream.aclose)

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort each request on the side that runs it now (a RemoteLlm sends ids it did not start to
        its server's Abort: the other side is not asked)."""
        prefilling = [r for r in request_ids if r in self._prefilling]
        decoding = [r for r in request_ids if r not in self._prefilling]
        if prefilling:
            await self.prefill.abort(prefilling)
        if decoding:
            await self.decode.abort(decoding)

    async def shutdown(self) -> None:
        """Shut both sides down."""
        if self._follow is not None:
            self._follow.cancel()
        self._ready.send(False)
        await asyncio.gather(self.prefill.shutdown(), self.decode.shutdown())

    # ---- internals ----------------------------------------------------------------------------------

    async def _prefill(self, request: GenerateRequest) -> GenerateOutput:
        """Run the prefill leg to its end; its outputs merged into one."""
        wp = request.sampling_params
        prefill_request = msgspec.structs.replace(
            request,
            kv_transfer_params=dict(PREFILL_KV_TRANSFER_PARAMS),
            sampling_params=msgspec.structs.replace(wp, max_tokens=1, min_tokens=0, logprobs=None),
        )
        got: GenerateOutput | None = None
        rid = request.request_id
        self._prefilling[rid] = self._prefilling.get(rid, 0) + 1
        try:
            async with await self.prefill.generate(prefill_request) as stream:
                async for out in stream:
                    if got is None:
                        got = out
                    else:
                        got.prompt_info = got.prompt_info or out.prompt_info
                        got.finish_reason = out.finish_reason
                        got.kv_transfer_params = out.kv_transfer_params or got.kv_transfer_params
        finally:
            left = self._prefilling.pop(rid) - 1
            if left:
                self._prefilling[rid] = left
        if got is None or got.finish_reason is None:
            raise LlmError("the prefill leg ended without a final output")
        if got.finish_reason == FinishReason.ERROR:
            raise LlmError("the prefill worker failed the request")
        return got

    async def _follow_readiness(self, prefill: Watch[bool], decode: Watch[bool]) -> None:
        async def follow(watch: Watch[bool]) -> None:
            async for _ in watch:
                self._ready.send(prefill.value and decode.value)

        await asyncio.gather(follow(prefill), follow(decode))


async def _with_prompt_info(stream: GenerateStream, prefilled: PromptInfo) -> AsyncIterator[GenerateOutput]:
    """The decode stream with the prefill leg's prompt logprobs on its first output."""
    first = True
    async for out in stream:
        if first and out.prompt_info is not None:
            out.prompt_info.prompt_logprobs = prefilled.prompt_logprobs
        first = False
        yield out
