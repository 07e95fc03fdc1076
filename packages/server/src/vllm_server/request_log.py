"""The request log (vLLM's `--enable-log-requests`, `--max-log-len`): one line per request an Llm takes.

`RequestLogLlm` wraps the served Llm, so every way in (chat, completions, /generate, vllm.Inference,
vllm.internal.Llm) logs the lowered request once, under its external request id: a router and its
worker log the same id (a client's `X-Request-Id` is in it), which is how one request is followed
through both. As vLLM's `RequestLogger.log_inputs`: the id, sampling parameters and LoRA adapter at
INFO; the prompt's token ids (at most `max_log_len` of them) at DEBUG. The prompt's text is the text
layer's and is not logged here.
"""

from __future__ import annotations

import logging

from vllm_llm import GenerateStream, Llm
from vllm_llm.delegating import DelegatingLlm
from vllm_llm.wire import GenerateRequest

__all__ = ["RequestLogLlm"]

logger = logging.getLogger(__name__)


class RequestLogLlm(DelegatingLlm):
    """Logs each request `generate` takes, then forwards it."""

    def __init__(self, inner: Llm, *, max_log_len: int | None) -> None:
        super().__init__(inner)
        self.max_log_len = max_log_len
        if not logger.isEnabledFor(logging.INFO):
            logger.warning(
                "--enable-log-requests is set but the log level is above INFO: no request is logged"
            )

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Log `request`, then generate on the inner Llm."""
        if logger.isEnabledFor(logging.DEBUG):
            ids = request.prompt_token_ids
            if self.max_log_len is not None:
                ids = ids[: self.max_log_len]
            embeds = request.prompt_embeds
            logger.debug(
                "Request %s details: prompt_token_ids: %s, prompt_embeds shape: %s.",
                request.request_id,
                ids,
                None if embeds is None else tuple(embeds.shape),
            )
        logger.info(
            "Received request %s: params: %s, lora_request: %s.",
            request.request_id,
            request.sampling_params,
            request.lora_request,
        )
        return await self.inner.generate(request)
