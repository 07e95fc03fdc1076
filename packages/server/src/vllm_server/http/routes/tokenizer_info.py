"""`GET /tokenizer_info` (vLLM's `--enable-tokenizer-info-endpoint`): the tokenizer's configuration."""

from __future__ import annotations

import asyncio
from typing import Any

from vllm_server.http.route import Handler
from vllm_server.state import ServerState
from vllm_server.tokenizer_info import tokenizer_info as build_info

__all__ = ["tokenizer_info"]


def tokenizer_info(state: ServerState) -> Handler:
    """The tokenizer info handler over `state`: the report is built once, on the first request."""
    built: dict[str, Any] = {}

    async def tokenizer_info() -> dict[str, Any]:
        """Get comprehensive tokenizer information."""
        if not built:
            source = state.text().tokenizer_source
            # Off the loop: loading the tokenizer with transformers takes a while.
            built.update(await asyncio.to_thread(build_info, source, state.config.server.chat_template))
        return built

    return tokenizer_info
