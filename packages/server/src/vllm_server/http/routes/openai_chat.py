"""`POST /v1/chat/completions`: OpenAI chat completions over the chat layer (`vllm_server.http.openai`)."""

from __future__ import annotations

from fastapi import Request, Response

from vllm_server.http.disconnect import unless_disconnected
from vllm_server.http.load_report import with_load_report
from vllm_server.http.openai import (
    ChatCompletionRequest,
    ChatOutput,
    ServingOptions,
    base_request_id,
    decode_body,
    event_stream,
    session_header,
    system_fingerprint,
)
from vllm_server.http.route import BodyHandler, Handler
from vllm_server.request_checks import vllm_wording
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState


def create_chat_completion(state: ServerState) -> Handler:
    """The chat completions handler over `state`."""

    serve = serve_chat_completion(state)

    async def create_chat_completion(raw: Request) -> Response:
        """Continue a conversation, streamed as SSE or whole."""
        state.check_accepting()
        return await serve(raw, await decode_body(raw, ChatCompletionRequest))

    return create_chat_completion


def serve_chat_completion(state: ServerState) -> BodyHandler[ChatCompletionRequest]:
    """What serves a decoded chat completion request over `state` (this route's, `/invocations`')."""

    options = ServingOptions.of(state.config)

    async def serve(raw: Request, body: ChatCompletionRequest) -> Response:
        chat = state.chat()
        model = await resolve_model(state, body.model)
        body.check(
            chat.text.info().max_model_len,
            trust_mm_kwargs=options.trust_request_mm_kwargs,
            # vLLM checks a request's template only where it renders one: not for Harmony (gpt-oss)
            trust_chat_template=options.trust_request_chat_template or chat.harmony,
        )
        request_id = f"chatcmpl-{base_request_id(raw, body.request_id)}"
        session_id = body.session(session_header(raw))
        with vllm_wording():
            stream = await chat.generate(
                body.chat_request(request_id, model.lora_request, session_id=session_id)
            )
        metrics = state.metrics.start(len(stream.prompt.prompt_token_ids), n=body.n or 1)
        output = ChatOutput(
            body,
            stream,
            request_id=request_id,
            model=model.name,
            metrics=metrics,
            options=options,
            fingerprint=system_fingerprint(
                chat.text.info(), options.fingerprint_mode, options.fingerprint_value
            ),
        )
        if body.streaming:
            return event_stream(output.frames(), options.sse_keep_alive_interval)
        return with_load_report(raw, await unless_disconnected(raw, output.response()), state.metrics)

    return serve
