"""`POST /invocations` (SageMaker): a JSON body served by the first generate API whose request it is.

As vLLM's SageMaker handler, inside the package's two transforms as under vLLM (`sagemaker_standards`:
they refuse a body that is no JSON object with their TypeError, and write the
`X-Amzn-SageMaker-Adapter-Identifier` header into its `model`, null without one: the served model):

- it is decoded as a chat completion request, else as a completion request, and served by the first it
  decodes as, whose validators run at once: their refusal is the answer (vLLM's pydantic models raise a
  VLLMValidationError, which ends the search, where a field's type only moves it on);
- a body that is neither is refused, naming both.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from fastapi import Request, Response

from vllm_server.errors import BadRequest, MalformedBody
from vllm_server.http.openai import (
    ChatCompletionRequest,
    CompletionRequest,
    check_json_media_type,
    decode_json,
    encode,
)
from vllm_server.http.route import Handler
from vllm_server.http.routes.openai_chat import serve_chat_completion
from vllm_server.http.routes.openai_completions import serve_completion
from vllm_server.state import ServerState

T = TypeVar("T")

#: vLLM's names for the request types, in the order it tries them.
_EXPECTED = [ChatCompletionRequest.__name__, CompletionRequest.__name__]


def invocations(state: ServerState) -> Handler:
    """The SageMaker invocations handler over `state`."""

    chat = serve_chat_completion(state)
    completion = serve_completion(state)

    async def invocations(raw: Request) -> Response:
        """Serve the body as the first generate request it is (chat, then completion)."""
        state.check_accepting()
        check_json_media_type(raw)
        request = encode(_as_object(await raw.body()))
        chat_body = _as(request, ChatCompletionRequest)
        if chat_body is not None:
            chat_body.validate()
            return await chat(raw, chat_body)
        completion_body = _as(request, CompletionRequest)
        if completion_body is not None:
            completion_body.validate()
            return await completion(raw, completion_body)
        raise BadRequest(f"Cannot find suitable handler for request. Expected one of: {_EXPECTED}")

    return invocations


def _as_object(body: bytes) -> dict[str, Any]:
    """`body` as a JSON object (Python's json, for its wording of a decode error, as vLLM's)."""
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise MalformedBody(f"JSON decode error: {exc}") from exc
    if not isinstance(data, dict):  # the transforms in front refuse it first (`sagemaker_standards`)
        raise BadRequest("the body is not a JSON object")
    return data


def _as(body: bytes, type_: type[T]) -> T | None:
    """`body` as `type_` if it decodes as one, else None."""
    try:
        return decode_json(body, type_)
    except BadRequest:
        return None
