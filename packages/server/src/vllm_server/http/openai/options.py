"""`ServingOptions`: the server flags the OpenAI routes honour per request (vLLM's flags of the same names).

`--enable-force-include-usage`, `--return-tokens-as-token-ids`, `--trust-request-mm-kwargs`,
`--trust-request-chat-template` and `--sse-keep-alive-interval` (`--response-role`,
`--default-chat-template-kwargs` and `--exclude-tools-when-tool-choice-none` are the chat layer's), the
output log (`--enable-log-outputs`), the system fingerprint (`--fingerprint-mode`), usage's
`prompt_tokens_details` (`--enable-prompt-tokens-details`); plus whether the
engine takes prompt embeddings, when the server knows (it owns the engine core).
"""

from __future__ import annotations

from typing import NamedTuple

from fastapi import Request

from vllm_server.config import FrontendConfig
from vllm_server.request_log import OutputLog, output_log

__all__ = ["DEFAULT_OPTIONS", "SESSION_ID_HEADER", "ServingOptions", "session_header"]

#: vLLM's SESSION_ID_HEADER.
SESSION_ID_HEADER = "X-Session-ID"


class ServingOptions(NamedTuple):
    """What the server's flags change in the OpenAI routes."""

    force_include_usage: bool = False
    return_tokens_as_token_ids: bool = False
    trust_request_mm_kwargs: bool = False
    trust_request_chat_template: bool = False
    sse_keep_alive_interval: float = 0.0
    #: True / False when the server owns the engine core; None for a provided or remote Llm.
    prompt_embeds_enabled: bool | None = None
    #: Where the routes log their outputs (--enable-log-outputs); None: not logged.
    output_log: OutputLog | None = None
    #: --fingerprint-mode and --fingerprint-value (`fingerprint.system_fingerprint`).
    fingerprint_mode: str = "full"
    fingerprint_value: str | None = None
    #: --enable-prompt-tokens-details: usage carries `prompt_tokens_details`.
    prompt_tokens_details: bool = False

    @classmethod
    def of(cls, config: FrontendConfig) -> ServingOptions:
        """The options of a server configured by `config`."""
        server = config.server
        engine = config.engine_core
        return cls(
            force_include_usage=server.enable_force_include_usage,
            return_tokens_as_token_ids=server.return_tokens_as_token_ids,
            trust_request_mm_kwargs=server.trust_request_mm_kwargs,
            trust_request_chat_template=server.trust_request_chat_template,
            sse_keep_alive_interval=server.sse_keep_alive_interval,
            prompt_embeds_enabled=None if engine is None else engine.settings.enable_prompt_embeds,
            output_log=output_log(server),
            fingerprint_mode=server.fingerprint_mode,
            fingerprint_value=server.fingerprint_value,
            prompt_tokens_details=server.enable_prompt_tokens_details,
        )


#: A server with every flag at its default.
DEFAULT_OPTIONS = ServingOptions()


def session_header(request: Request) -> str | None:
    """The `X-Session-ID` header, when set and not empty."""
    return request.headers.get(SESSION_ID_HEADER) or None
