"""Anthropic's Messages API over the chat layer: request bodies, their conversion to the chat completions
request vLLM serves them as, the message (whole or as SSE events) and Anthropic's error body.

The route module (`vllm_server.http.routes.anthropic_messages`) is only wiring over these.
"""

from vllm_server.http.anthropic.conversion import chat_body
from vllm_server.http.anthropic.error import anthropic_error_body, anthropic_error_response
from vllm_server.http.anthropic.message_output import message_response
from vllm_server.http.anthropic.message_stream import MessageStream
from vllm_server.http.anthropic.request import CountTokensRequest, MessagesRequest
from vllm_server.http.anthropic.template_facts import TemplateFacts

__all__ = [
    "CountTokensRequest",
    "MessageStream",
    "MessagesRequest",
    "TemplateFacts",
    "anthropic_error_body",
    "anthropic_error_response",
    "chat_body",
    "message_response",
]
