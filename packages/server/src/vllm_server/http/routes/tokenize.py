"""`POST /tokenize` (a prompt or chat messages) and `POST /detokenize`, as vLLM's."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from vllm_llm import ChatRequest
from vllm_server.errors import BadRequest
from vllm_server.http.openai import DetokenizeBody, TokenizeBody, decode_body
from vllm_server.http.openai.chat_request import check_chat_template, check_generation_prompt
from vllm_server.http.openai.options import ServingOptions
from vllm_server.http.openai.tools import tool_dicts
from vllm_server.http.route import Handler
from vllm_server.served_model import resolve_model
from vllm_server.state import ServerState


def tokenize(state: ServerState) -> Handler:
    """The tokenize handler over `state`: the served model's tokenizer and chat template."""

    options = ServingOptions.of(state.config)

    async def tokenize(raw: Request) -> dict[str, Any]:
        """Token ids of a prompt, or of chat messages rendered with the chat template."""
        body = await decode_body(raw, TokenizeBody)
        text = state.text()
        await resolve_model(state, body.model)
        if body.messages is not None:
            check_generation_prompt(body.add_generation_prompt, body.continue_final_message)
            if not options.trust_request_chat_template:
                check_chat_template(body.chat_template, body.chat_template_kwargs)
            rendered = await state.chat().render_with_media(
                ChatRequest(
                    request_id="tokenize",
                    messages=body.messages,
                    add_generation_prompt=body.add_generation_prompt,
                    continue_final_message=body.continue_final_message,
                    tools=tool_dicts(body.tools),
                    # vLLM's /tokenize has no tool_choice: its tools always reach the template.
                    tool_choice=None,
                    chat_template=body.chat_template,
                    chat_template_kwargs=body.chat_template_kwargs,
                    add_special_tokens=bool(body.add_special_tokens),
                    mm_processor_kwargs=body.mm_processor_kwargs,
                    kv_transfer_params=body.kv_transfer_params,
                )
            )
            tokens = rendered.prompt_token_ids
        elif body.prompt is not None:
            add_special = True if body.add_special_tokens is None else body.add_special_tokens
            tokens = text.encode(body.prompt, add_special_tokens=add_special)
        else:
            raise BadRequest("either `prompt` or `messages` must be given", param="prompt")
        return {
            "count": len(tokens),
            "max_model_len": text.info().max_model_len,
            "tokens": tokens,
            "token_strs": text.tokenizer.convert_ids_to_tokens(tokens) if body.return_token_strs else None,
        }

    return tokenize


def detokenize(state: ServerState) -> Handler:
    """The detokenize handler over `state`."""

    async def detokenize(raw: Request) -> dict[str, Any]:
        """The text of token ids."""
        body = await decode_body(raw, DetokenizeBody)
        text = state.text()
        await resolve_model(state, body.model)
        vocab = text.info().vocab_size
        bad = [t for t in body.tokens if not 0 <= t < vocab]
        if bad:
            raise BadRequest(f"token ids {bad[:8]} are out of vocabulary ({vocab})", param="tokens")
        return {"prompt": text.decode(body.tokens, skip_special_tokens=False)}

    return detokenize
