"""`POST /v1/responses`: the OpenAI Responses API (stateless) over the chat layer
(`vllm_server.http.responses`)."""

from __future__ import annotations

from fastapi import Request, Response

from vllm_server.http.disconnect import unless_disconnected
from vllm_server.http.openai import (
    ServingOptions,
    base_request_id,
    decode_body,
    event_stream,
    session_header,
)
from vllm_server.http.responses import ResponsesOutput, ResponsesRequest, resolve_tool_choice
from vllm_server.http.route import Handler
from vllm_server.request_checks import vllm_wording
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState


def create_response(state: ServerState) -> Handler:
    """The Responses handler over `state`."""

    options = ServingOptions.of(state.config)

    async def create_response(raw: Request) -> Response:
        """Answer one Responses request, streamed as SSE events or whole."""
        state.check_accepting()
        body = await decode_body(raw, ResponsesRequest)
        chat = state.chat()
        model = await resolve_model(state, body.model)
        info = chat.text.info()
        tools = body.check(
            info.max_model_len,
            trust_mm_kwargs=options.trust_request_mm_kwargs,
            trust_chat_template=options.trust_request_chat_template,
        )
        tool_choice = resolve_tool_choice(body.tool_choice, tools)
        request_id = body.request_id or f"resp_{base_request_id(raw, None)}"
        session_id = body.session(session_header(raw))
        request = body.chat_request(request_id, tools, tool_choice, model.lora_request, session_id=session_id)
        with vllm_wording():
            stream = await chat.generate(request)
        metrics = state.metrics.start(len(stream.prompt.prompt_token_ids), n=1)
        output = ResponsesOutput(
            body,
            stream,
            request_id=request_id,
            model=model.name,
            info=info,
            tools=tools,
            tool_choice=tool_choice,
            metrics=metrics,
            output_log=options.output_log,
        )
        if body.streaming:
            return event_stream(output.frames(), options.sse_keep_alive_interval)
        return await unless_disconnected(raw, output.response())

    return create_response
