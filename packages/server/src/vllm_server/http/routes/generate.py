"""`POST /inference/v1/generate`: tokens in, tokens out, as vLLM's (see `vllm_server.http.openai`).

A request the text layer would only pass through (one choice, no stop strings, no prompt logprobs, token
output) is lowered by the text layer and read raw from the Llm, without detokenizing; the others go through
the text layer.
"""

from __future__ import annotations

from fastapi import Request, Response

from vllm_llm import TextLlm, TextRequest, TextStream
from vllm_server.http.disconnect import unless_disconnected
from vllm_server.http.openai import (
    GenerateBody,
    RawTokenStream,
    TokensOutput,
    base_request_id,
    decode_body,
    event_stream,
)
from vllm_server.http.route import Handler
from vllm_server.request_checks import vllm_wording
from vllm_server.request_log import output_log
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState


def generate(state: ServerState) -> Handler:
    """The tokens-in / tokens-out handler over `state`."""
    log = output_log(state.config.server)

    async def generate(raw: Request) -> Response:
        """Generate from token ids; token ids (and optionally text) out, streamed as SSE or whole."""
        state.check_accepting()
        body = await decode_body(raw, GenerateBody)
        text = state.text()
        model = await resolve_model(state, body.model)
        body.check()
        request_id = f"generate-tokens-{base_request_id(raw, body.request_id)}"
        request = body.text_request(request_id, model.lora_request)
        with vllm_wording():
            stream = await _start(text, request, raw_tokens=body.raw_tokens_suffice)
        metrics = state.metrics.start(len(stream.prompt_token_ids), n=request.params.n)
        output = TokensOutput(
            body,
            stream,
            request_id=request_id,
            model=model.name,
            metrics=metrics,
            output_log=log,
            prompt_tokens_details=state.config.server.enable_prompt_tokens_details,
        )
        if body.stream:
            return event_stream(output.frames())
        return await unless_disconnected(raw, output.response())

    return generate


async def _start(text: TextLlm, request: TextRequest, *, raw_tokens: bool) -> TextStream | RawTokenStream:
    if not raw_tokens:
        return await text.generate(request)
    (lowered,) = text.lower(request)
    stream = await text.llm.generate(lowered)
    return RawTokenStream(stream, lowered.prompt_token_ids, logprobs=request.params.logprobs is not None)
