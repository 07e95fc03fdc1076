"""The servicer of `vllm.Inference` over the server's text layer: Generate (unary) and GenerateStream.

A request becomes one `TextRequest` (`inference_request`): an empty request_id becomes a uuid4, an
empty model the primary served name (a LoRA adapter served as a model is accepted too), an unknown one
NOT_FOUND. GenerateStream sends the prompt info first, then one `SequenceOutput` delta per message, the
last of each choice with its `finish_info`; Generate collects one choice into one response (more choices
need GenerateStream, as the response has room for one). Errors go through `map_error` and
`context.abort`; a cancelled call (client cancel, disconnect, deadline, the server's grace running out)
closes the text stream in `finally`, which aborts the request. Metrics are recorded as the HTTP routes do.
"""

from __future__ import annotations

import uuid
from typing import NamedTuple

import grpc

from vllm_llm import InvalidRequest, TextDelta, TextStream, TokenLogprobs
from vllm_server.grpc.guarded import register_proto_service
from vllm_server.grpc.inference_request import output_options, text_request
from vllm_server.grpc.inference_response import Responses
from vllm_server.grpc.proto import inference_pb2 as pb
from vllm_server.grpc.status import ServicerContext, abort_call
from vllm_server.metrics import RequestMetrics
from vllm_server.request_checks import check_finish, check_max_tokens, vllm_wording
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState
from vllm_server.tracing import TRACE_HEADERS

__all__ = ["INFERENCE_SERVICE", "InferenceService"]

INFERENCE_SERVICE = "vllm.Inference"


class _Started(NamedTuple):
    stream: TextStream
    responses: Responses
    metrics: RequestMetrics


class InferenceService:
    """Serves `vllm.Inference` from a server's state; register it with `register(server)`."""

    name = INFERENCE_SERVICE
    _state: ServerState

    def __init__(self, state: ServerState) -> None:
        self._state = state

    def register(self, server: grpc.aio.Server) -> None:
        """Add the service to `server` (from the .proto's service, with guarded request decoding)."""
        register_proto_service(server, self, pb.DESCRIPTOR.services_by_name["Inference"])

    async def Generate(self, request: pb.GenerateRequest, context: ServicerContext) -> pb.GenerateResponse:
        """Generate one choice and return it whole."""
        try:
            if request.sampling.num_sequences > 1:
                raise InvalidRequest(
                    "num_sequences > 1 needs GenerateStream: a GenerateResponse holds one sequence",
                    param="num_sequences",
                )
            started = await self._start(request, context)
        except Exception as exc:
            await abort_call(context, exc, service=INFERENCE_SERVICE)
        try:
            return await _collect(started)
        except Exception as exc:
            await abort_call(context, exc, service=INFERENCE_SERVICE)

    async def GenerateStream(self, request: pb.GenerateRequest, context: ServicerContext) -> None:
        """Stream the prompt info, then the deltas of every choice.

        A coroutine that writes with `context.write` (grpc.aio takes it for a streaming handler), not an
        async generator: a cancellation then always lands in this frame, so `finally` aborts the request.
        """
        try:
            started = await self._start(request, context)
        except Exception as exc:
            await abort_call(context, exc, service=INFERENCE_SERVICE)
        stream, responses, metrics = started
        # Prompt logprobs arrive with the first output; without them the prompt info need not wait.
        prompt_pending = True
        reason: str | None = None
        last: str | None = None
        try:
            if not responses.options.prompt_logprobs:
                await context.write(pb.GenerateResponse(prompt_info=responses.prompt_info(None)))
                prompt_pending = False
            async for d in stream:
                check_finish(d.finish_reason)
                metrics.tokens(len(d.token_ids))
                last = d.finish_reason or last
                if prompt_pending:
                    await context.write(
                        pb.GenerateResponse(prompt_info=responses.prompt_info(d.prompt_logprobs))
                    )
                    prompt_pending = False
                if d.text or d.token_ids or d.finish_reason is not None:
                    await context.write(
                        pb.GenerateResponse(outputs=_output(responses, d, d.text, d.token_ids, d.logprobs))
                    )
            reason = last
        except Exception as exc:
            await abort_call(context, exc, service=INFERENCE_SERVICE)
        finally:
            await stream.aclose()
            metrics.finish(reason)

    async def _start(self, request: pb.GenerateRequest, context: ServicerContext) -> _Started:
        """Validate and submit `request` (errors raise here, before any response)."""
        state = self._state
        state.check_accepting()
        text = state.text()
        model = await resolve_model(state, request.model)
        check_max_tokens(request.stopping.max_new_tokens or None, "max_new_tokens", text.info().max_model_len)
        request_id = request.request_id or str(uuid.uuid4())
        lowered = text_request(request, text, request_id=request_id, lora_request=model.lora_request)
        lowered.trace_headers = _trace_headers(context)
        with vllm_wording():
            stream = await text.generate(lowered)
        metrics = state.metrics.start(len(stream.prompt_token_ids), n=lowered.params.n)
        return _Started(stream, Responses(output_options(request), stream.prompt_token_ids), metrics)


def _trace_headers(context: ServicerContext) -> dict[str, str] | None:
    """The caller's W3C trace context in the call's metadata (vLLM's server takes it from HTTP headers)."""
    found = {key: value for key, value in context.invocation_metadata() or () if key in TRACE_HEADERS}
    return found or None


async def _collect(started: _Started) -> pb.GenerateResponse:
    """Read the one choice to its end; the response carries the prompt info and the whole choice."""
    stream, responses, metrics = started
    texts: list[str] = []
    token_ids: list[int] = []
    logprobs: list[TokenLogprobs] | None = None
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    final: TextDelta | None = None
    try:
        async for d in stream:
            check_finish(d.finish_reason)
            metrics.tokens(len(d.token_ids))
            texts.append(d.text)
            token_ids.extend(d.token_ids)
            if d.logprobs is not None:
                logprobs = [*(logprobs or []), *d.logprobs]
            if d.prompt_logprobs is not None and prompt_logprobs is None:
                prompt_logprobs = d.prompt_logprobs
            final = d
    finally:
        await stream.aclose()
        metrics.finish(None if final is None else final.finish_reason)
    assert final is not None, "a text stream ends with a finished delta"
    return pb.GenerateResponse(
        prompt_info=responses.prompt_info(prompt_logprobs),
        outputs=_output(responses, final, "".join(texts), token_ids, logprobs),
    )


def _output(
    responses: Responses,
    d: TextDelta,
    text: str,
    token_ids: list[int],
    logprobs: list[TokenLogprobs] | None,
) -> pb.SequenceOutput:
    return responses.output(
        d.index,
        text,
        token_ids,
        logprobs,
        finish_reason=d.finish_reason,
        stop_reason=d.stop_reason,
        kv_transfer_params=d.kv_transfer_params,
    )
