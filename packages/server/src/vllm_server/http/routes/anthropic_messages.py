"""`POST /v1/messages` and `POST /v1/messages/count_tokens`: Anthropic's Messages API over the chat layer
(`vllm_server.http.anthropic`), its errors in Anthropic's shape (vLLM's translate_error_response)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request, Response

from vllm_llm import ChatLlm
from vllm_server.http.anthropic import (
    CountTokensRequest,
    MessagesRequest,
    MessageStream,
    TemplateFacts,
    anthropic_error_response,
    chat_body,
    message_response,
)
from vllm_server.http.anthropic.request import ThinkingDisabled
from vllm_server.http.disconnect import unless_disconnected
from vllm_server.http.openai import (
    ServingOptions,
    base_request_id,
    decode_body,
    event_stream,
    json_response,
    session_header,
)
from vllm_server.http.route import Handler
from vllm_server.request_checks import vllm_wording
from vllm_server.request_log import output_log
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState

__all__ = ["count_tokens", "create_message"]


class _Facts:
    """The template facts of the state's chat layer, made when the chat layer first serves."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._facts: TemplateFacts | None = None

    def of(self, chat: ChatLlm) -> TemplateFacts:
        if self._facts is None:
            server = self._state.config.server
            self._facts = TemplateFacts(
                chat, server.chat_template, disabled_thinking_effort=server.anthropic_disabled_thinking_effort
            )
        return self._facts


def _anthropic_errors(handle: Callable[[Request], Awaitable[Response]]) -> Handler:
    """`handle`, with every error it raises answered in Anthropic's shape."""

    async def handler(raw: Request) -> Response:
        try:
            return await handle(raw)
        except Exception as exc:
            return anthropic_error_response(exc)

    handler.__doc__ = handle.__doc__
    return handler


def create_message(state: ServerState) -> Handler:
    """The messages handler over `state`."""
    facts = _Facts(state)
    log = output_log(state.config.server)
    trusted = ServingOptions.of(state.config).trust_request_chat_template
    details = state.config.server.enable_prompt_tokens_details

    async def create_message(raw: Request) -> Response:
        """Continue a conversation, streamed as Anthropic's SSE events or whole."""
        state.check_accepting()
        body = await decode_body(raw, MessagesRequest)
        body.check()
        chat = state.chat()
        template = facts.of(chat)
        disabled = template.disabled_thinking_effort if _thinking_disabled(body) else "none"
        chat_request = chat_body(
            body, merge_inline_system=template.merge_inline_system, disabled_thinking_effort=disabled
        )
        model = await resolve_model(state, chat_request.model)
        chat_request.check(chat.text.info().max_model_len, trust_chat_template=trusted or chat.harmony)
        request_id = f"chatcmpl-{base_request_id(raw, None)}"
        with vllm_wording():
            stream = await chat.generate(
                chat_request.chat_request(request_id, model.lora_request, session_id=session_header(raw))
            )
        metrics = state.metrics.start(len(stream.prompt.prompt_token_ids), n=1)
        if body.streaming:
            output = MessageStream(
                stream,
                message_id=request_id,
                model=model.name,
                metrics=metrics,
                output_log=log,
                prompt_tokens_details=details,
            )
            return event_stream(output.frames())
        return await unless_disconnected(
            raw,
            message_response(
                stream,
                message_id=request_id,
                model=model.name,
                metrics=metrics,
                output_log=log,
                prompt_tokens_details=details,
            ),
        )

    return _anthropic_errors(create_message)


def count_tokens(state: ServerState) -> Handler:
    """The count_tokens handler over `state`."""
    facts = _Facts(state)
    trusted = ServingOptions.of(state.config).trust_request_chat_template

    async def count_tokens(raw: Request) -> Response:
        """The prompt tokens the conversation renders to."""
        body = await decode_body(raw, CountTokensRequest)
        body.check()
        chat = state.chat()
        template = facts.of(chat)
        disabled = template.disabled_thinking_effort if _thinking_disabled(body) else "none"
        chat_request = chat_body(
            body, merge_inline_system=template.merge_inline_system, disabled_thinking_effort=disabled
        )
        await resolve_model(state, chat_request.model)
        chat_request.check(chat.text.info().max_model_len, trust_chat_template=trusted or chat.harmony)
        rendered = await chat.render_with_media(chat_request.chat_request("count-tokens", None))
        count = len(rendered.prompt_token_ids)
        return json_response({"input_tokens": count, "context_management": {"original_input_tokens": count}})

    return _anthropic_errors(count_tokens)


def _thinking_disabled(body: MessagesRequest | CountTokensRequest) -> bool:
    return isinstance(body.thinking, ThinkingDisabled)
