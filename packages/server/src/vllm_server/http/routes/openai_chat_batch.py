"""`POST /v1/chat/completions/batch`: several conversations in one request, one choice each (vLLM's
`OpenAIServingChatBatch`).

The body is a chat completion request whose `messages` is a list of conversations, with vLLM's batch
rules: `tool_choice` may only be "none" (its default here), and `n` only 1; no beam search, no
`kv_transfer_params.prompt_token_ids`, and `tools` are not rendered. Each conversation becomes the chat
completion request it would be alone, with every other field of the body (vLLM's request model keeps
fields it does not declare, and hands them on), checked and rendered as it would be; all are checked
before any is submitted, and their engine requests (`ID_0`, `ID_1`, ...) run at once. The response
carries choice `i` for conversation `i` and the usage summed over all of them. One that fails ends the
others (their engine requests are aborted).

One deliberate difference: `stream: true` is refused. vLLM's documentation of the route says streaming
is not supported, but its server takes the flag and answers with each choice's last streamed delta only
(a truncated text).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

from fastapi import Request, Response

from vllm_server.errors import BadParameter, BodyIssue, InvalidBody
from vllm_server.http.disconnect import unless_disconnected
from vllm_server.http.openai import (
    ChatCompletionRequest,
    ChatOutput,
    ServingOptions,
    base_request_id,
    check_json_media_type,
    decode_json,
    encode,
    session_header,
    system_fingerprint,
)
from vllm_server.http.openai.usage import usage_json
from vllm_server.http.openai.validation import shown_input
from vllm_server.http.route import Handler
from vllm_server.request_checks import vllm_wording
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState

__all__ = ["create_batch_chat_completion"]


def create_batch_chat_completion(state: ServerState) -> Handler:
    """The batched chat completions handler over `state`."""

    options = ServingOptions.of(state.config)

    async def create_batch_chat_completion(raw: Request) -> Response:
        """Continue each of several conversations, answered whole."""
        state.check_accepting()
        check_json_media_type(raw)
        data = decode_json(await raw.body(), dict[str, Any])
        bodies = _conversations(data)
        chat = state.chat()
        max_model_len = chat.text.info().max_model_len
        for body in bodies:
            body.check(
                max_model_len,
                trust_mm_kwargs=options.trust_request_mm_kwargs,
                trust_chat_template=options.trust_request_chat_template or chat.harmony,
            )
        first = bodies[0]
        model = await resolve_model(state, first.model)
        request_id = f"chatcmpl-{base_request_id(raw, first.request_id)}"
        info = chat.text.info()
        fingerprint = system_fingerprint(info, options.fingerprint_mode, options.fingerprint_value)
        outputs: list[ChatOutput] = []
        try:
            for i, body in enumerate(bodies):
                sub_id = f"{request_id}_{i}"
                session_id = body.session(session_header(raw))
                request = body.chat_request(sub_id, model.lora_request, session_id=session_id)
                with vllm_wording():
                    stream = await chat.generate(request)
                metrics = state.metrics.start(len(stream.prompt.prompt_token_ids), n=1)
                outputs.append(
                    ChatOutput(
                        body, stream, request_id=sub_id, model=model.name, metrics=metrics, options=options,
                        fingerprint=fingerprint,
                    )
                )  # fmt: skip
        except BaseException:
            for output in outputs:
                await output.stream.aclose()
            raise
        return await unless_disconnected(raw, _merged(request_id, outputs))

    return create_batch_chat_completion


async def _merged(request_id: str, outputs: list[ChatOutput]) -> dict[str, Any]:
    """One `chat.completion` of every conversation's: choice `i` is conversation `i`'s."""
    try:
        async with asyncio.TaskGroup() as group:  # one that fails cancels (and so aborts) the others
            tasks = [group.create_task(output.response()) for output in outputs]
    except BaseExceptionGroup as failed:
        raise failed.exceptions[0] from None
    responses = [task.result() for task in tasks]
    choices = []
    prompt_tokens = completion_tokens = 0
    for i, response in enumerate(responses):
        for choice in response["choices"]:
            choices.append({**choice, "index": i})
        prompt_tokens += response["usage"]["prompt_tokens"]
        completion_tokens += response["usage"]["completion_tokens"]
    first = responses[0]
    return {
        "id": request_id,
        "object": "chat.completion",
        "created": first["created"],
        "model": first["model"],
        "choices": choices,
        "service_tier": None,
        "system_fingerprint": first["system_fingerprint"],
        "usage": usage_json(prompt_tokens, completion_tokens),  # no details: vLLM gives none here
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "prompt_text": None,
        "kv_transfer_params": None,
    }


def _conversations(data: dict[str, Any]) -> list[ChatCompletionRequest]:
    """Each conversation of the batch as its own chat completion request, after vLLM's batch checks."""
    _check_batch_mode(data)  # vLLM's model validator runs before its fields are validated
    messages = data.get("messages")
    issue = _list_issue(("body", "messages"), messages, data)
    if issue is not None:
        raise InvalidBody([issue])
    assert isinstance(messages, list)
    issues = [_list_issue(("body", "messages", i), m, m) for i, m in enumerate(messages)]
    found = [issue for issue in issues if issue is not None]
    if found:
        raise InvalidBody(found)
    # vLLM renders a batch's conversations without their tools (they could never be called).
    shared = {key: value for key, value in data.items() if key not in ("messages", "tools")}
    shared.setdefault("tool_choice", "none")
    bodies = []
    for i, conversation in enumerate(messages):
        try:
            bodies.append(decode_json(encode({**shared, "messages": conversation}), ChatCompletionRequest))
        except InvalidBody as exc:
            raise InvalidBody([_in_conversation(issue, i) for issue in exc.issues]) from None
    return bodies


def _list_issue(loc: tuple[str | int, ...], value: object, whole: object) -> BodyIssue | None:
    """pydantic's issue for a `list` field with at least one item: missing, not a list, or empty."""
    if value is None and loc == ("body", "messages") and isinstance(whole, dict) and "messages" not in whole:
        return BodyIssue("missing", loc, "Field required", shown_input(whole))
    if not isinstance(value, list):
        return BodyIssue("list_type", loc, "Input should be a valid list", shown_input(value))
    if not value:
        return BodyIssue(
            "too_short",
            loc,
            "List should have at least 1 item after validation, not 0",
            shown_input(value),
            {"field_type": "List", "min_length": 1, "actual_length": 0},
        )
    return None


def _in_conversation(issue: BodyIssue | str, i: int) -> BodyIssue | str:
    """A conversation's issue at its place in the batch: `body.messages.I.…`."""
    if isinstance(issue, BodyIssue) and issue.loc[:2] == ("body", "messages"):
        return dataclasses.replace(issue, loc=("body", "messages", i, *issue.loc[2:]))
    return issue


def _check_batch_mode(data: dict[str, Any]) -> None:
    """vLLM's check_batch_mode: what one batch cannot do."""
    if data.get("use_beam_search"):
        raise BadParameter(
            "Batch chat completions do not support beam search. Please set `use_beam_search` to False.",
            param="use_beam_search",
        )
    kv_transfer_params = data.get("kv_transfer_params")
    if isinstance(kv_transfer_params, dict) and kv_transfer_params.get("prompt_token_ids") is not None:
        raise BadParameter(
            "Batch chat completions do not support `kv_transfer_params['prompt_token_ids']`: one "
            "pre-tokenized prompt cannot serve several conversations.",
            param="kv_transfer_params.prompt_token_ids",
        )
    if data.get("stream"):
        raise BadParameter(
            "Batch chat completions do not support streaming. Please set `stream` to False.", param="stream"
        )
    n = data.get("n", 1)
    if n is not None and n != 1:
        message = "Batch chat completions do not support `n > 1`. Please set `n` to 1."
        raise BadParameter(message, param="n", value=n)
    tool_choice = data.get("tool_choice", "none")
    if tool_choice is not None and tool_choice != "none":
        expected = "'none'"
        where = ("body", "tool_choice")
        shown = shown_input(tool_choice)
        what = f"Input should be {expected}"
        issue = BodyIssue("literal_error", where, what, shown, {"expected": expected})
        raise InvalidBody([issue])
