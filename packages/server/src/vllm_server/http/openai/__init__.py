"""The OpenAI-compatible and tokens-in / tokens-out HTTP surface: request bodies, outputs, SSE, logprobs.

The route modules (`vllm_server.http.routes.openai_*`, `tokenize`, `generate`) are only wiring over these:
a body is decoded (`codec`), checked and lowered (`*_request`), submitted through the text or chat layer,
and its stream rendered (`*_output`) as SSE frames or one JSON body, built from plain dicts and encoded
once with msgspec.
"""

from vllm_server.http.openai.chat_output import ChatOutput
from vllm_server.http.openai.chat_request import ChatCompletionRequest
from vllm_server.http.openai.codec import (
    check_json_media_type,
    decode_body,
    decode_json,
    encode,
    json_response,
)
from vllm_server.http.openai.completion_output import CompletionOutput, start_streams
from vllm_server.http.openai.completion_request import CompletionRequest
from vllm_server.http.openai.fingerprint import system_fingerprint
from vllm_server.http.openai.generate_output import TokensOutput
from vllm_server.http.openai.generate_request import GenerateBody
from vllm_server.http.openai.options import ServingOptions, session_header
from vllm_server.http.openai.raw_stream import RawTokenStream
from vllm_server.http.openai.request_id import base_request_id
from vllm_server.http.openai.sse import event_stream
from vllm_server.http.openai.tokenize_request import DetokenizeBody, TokenizeBody

__all__ = [
    "ChatCompletionRequest",
    "ChatOutput",
    "CompletionOutput",
    "CompletionRequest",
    "DetokenizeBody",
    "GenerateBody",
    "RawTokenStream",
    "ServingOptions",
    "TokenizeBody",
    "TokensOutput",
    "base_request_id",
    "check_json_media_type",
    "decode_body",
    "decode_json",
    "encode",
    "event_stream",
    "json_response",
    "session_header",
    "start_streams",
    "system_fingerprint",
]
