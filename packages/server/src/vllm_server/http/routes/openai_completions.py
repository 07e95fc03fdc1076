"""`POST /v1/completions`: OpenAI completions over the text layer (see `vllm_server.http.openai`)."""

from __future__ import annotations

from fastapi import Request, Response

from vllm_server.http.openai import (
    CompletionOutput,
    CompletionRequest,
    base_request_id,
    decode_body,
    event_stream,
    json_response,
    start_streams,
)
from vllm_server.http.route import Handler
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState


def create_completion(state: ServerState) -> Handler:
    """The completions handler over `state`."""

    async def create_completion(raw: Request) -> Response:
        """Complete one or several prompts, streamed as SSE or whole."""
        state.check_accepting()
        body = await decode_body(raw, CompletionRequest)
        text = state.text()
        model = await resolve_model(state, body.model)
        body.check(text.info().max_model_len)
        request_id = f"cmpl-{base_request_id(raw, body.request_id)}"
        requests = body.text_requests(request_id, model.lora_request)
        streams = await start_streams(text, requests)
        metrics = state.metrics.start(sum(len(s.prompt_token_ids) for s in streams))
        output = CompletionOutput(
            body,
            text,
            requests,
            streams,
            request_id=request_id,
            model=model.name,
            metrics=metrics,
        )
        if body.streaming:
            return event_stream(output.frames())
        return json_response(await output.response())

    return create_completion
