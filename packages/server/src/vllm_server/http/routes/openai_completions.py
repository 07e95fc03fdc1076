"""`POST /v1/completions`: OpenAI completions over the text layer (see `vllm_server.http.openai`)."""

from __future__ import annotations

from fastapi import Request, Response

from vllm_server.http.disconnect import unless_disconnected
from vllm_server.http.load_report import with_load_report
from vllm_server.http.openai import (
    CompletionOutput,
    CompletionRequest,
    ServingOptions,
    base_request_id,
    decode_body,
    event_stream,
    session_header,
    start_streams,
    system_fingerprint,
)
from vllm_server.http.route import BodyHandler, Handler
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState


def create_completion(state: ServerState) -> Handler:
    """The completions handler over `state`."""

    serve = serve_completion(state)

    async def create_completion(raw: Request) -> Response:
        """Complete one or several prompts, streamed as SSE or whole."""
        state.check_accepting()
        return await serve(raw, await decode_body(raw, CompletionRequest))

    return create_completion


def serve_completion(state: ServerState) -> BodyHandler[CompletionRequest]:
    """What serves a decoded completion request over `state` (this route's, `/invocations`')."""

    options = ServingOptions.of(state.config)

    async def serve(raw: Request, body: CompletionRequest) -> Response:
        text = state.text()
        model = await resolve_model(state, body.model)
        body.check(text.info().max_model_len, prompt_embeds_enabled=options.prompt_embeds_enabled)
        request_id = f"cmpl-{base_request_id(raw, body.request_id)}"
        requests = body.text_requests(
            request_id, model.lora_request, session_id=body.session(session_header(raw))
        )
        streams = await start_streams(text, requests)
        metrics = state.metrics.start(sum(len(s.prompt_token_ids) for s in streams), n=requests[0].params.n)
        output = CompletionOutput(
            body,
            text,
            requests,
            streams,
            request_id=request_id,
            model=model.name,
            metrics=metrics,
            options=options,
            fingerprint=system_fingerprint(text.info(), options.fingerprint_mode, options.fingerprint_value),
        )
        if body.streaming:
            return event_stream(output.frames(), options.sse_keep_alive_interval)
        return with_load_report(raw, await unless_disconnected(raw, output.response()), state.metrics)

    return serve
