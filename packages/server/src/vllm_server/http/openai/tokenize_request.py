"""The bodies of `POST /tokenize` (a prompt or chat messages) and `POST /detokenize`, as vLLM's."""

from __future__ import annotations

from typing import Any

import msgspec

from vllm_llm import ChatMessage
from vllm_server.http.openai.tools import ChatTool

__all__ = ["DetokenizeBody", "TokenizeBody"]


class TokenizeBody(msgspec.Struct, kw_only=True):
    """TokenizeCompletionRequest (`prompt`) or TokenizeChatRequest (`messages`)."""

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: bool | None = None
    """Default: true for a prompt, false for messages (the template writes them), as vLLM."""
    return_token_strs: bool | None = False
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    tools: list[ChatTool] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    """Not TokenizeChatRequest's, but vLLM's renderer reads forwarded `prompt_token_ids` from it
    (its body keeps unknown fields): they are the tokens then, as for a decode stage's prompt."""


class DetokenizeBody(msgspec.Struct, kw_only=True):
    """DetokenizeRequest."""

    tokens: list[int]
    model: str | None = None
