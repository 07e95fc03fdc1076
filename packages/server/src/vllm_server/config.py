"""Server configuration: `ServerConfig` (listeners, TLS, auth, CORS, modes) and `EngineCoreConfig`.

`ServerConfig` has defaults, so embedding the server takes no more than the fields that differ.
`EngineCoreConfig` holds EngineCoreLlm's own `EngineCoreSettings` and adds only what the server does
around them (start-up LoRA adapters, the profiler). The CLI builds both as one `FrontendConfig`;
`/server_info` reports them as one flat mapping.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import msgspec

from vllm_llm import EngineCoreSettings, ParserOptions
from vllm_llm.wire import LoraRequest
from vllm_server.tls import TlsConfig


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """How the server listens and behaves, whatever Llm it serves."""

    host: str = "127.0.0.1"
    port: int = 8000
    #: gRPC port (vllm.internal.Llm and grpc.health.v1); None serves no gRPC.
    grpc_port: int | None = 50051
    #: gRPC bind host; defaults to `host`.
    grpc_host: str | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    #: CA certificates that gRPC client certificates must chain to (mTLS on gRPC).
    ssl_ca_certs: Path | None = None
    api_key: str | None = None
    #: Names under which the model is served; the first is the primary. Default: the Llm's own name.
    served_model_name: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    allow_credentials: bool = False
    allowed_methods: tuple[str, ...] = ("*",)
    allowed_headers: tuple[str, ...] = ("*",)
    #: Transport (vLLM's flags of the same names, `vllm_server.frontend_flags`): HTTP on a Unix socket
    #: instead of host:port, uvicorn's log level, HTTPS client certificates and ciphers, certificate
    #: files reloaded when they change, the path prefix of a proxy in front, middleware imported by
    #: dotted name, the docs routes, h11's limits (as vLLM hands them to uvicorn).
    uds: str | None = None
    uvicorn_log_level: Literal["critical", "error", "warning", "info", "debug", "trace"] = "info"
    ssl_cert_reqs: int = 0
    ssl_ciphers: str | None = None
    enable_ssl_refresh: bool = False
    root_path: str = ""
    middleware: tuple[str, ...] = ()
    disable_fastapi_docs: bool = False
    enable_offline_docs: bool = False
    h11_max_incomplete_event_size: int = 4 * 1024 * 1024
    h11_max_header_count: int = 256
    #: Registers the engine-core admin routes (over an engine-core Llm only).
    dev_mode: bool = False
    #: Registers load/unload LoRA routes (over an engine-core Llm only).
    enable_runtime_lora: bool = False
    #: Tokenizer override for the text and chat layers (default: the Llm's LlmInfo.tokenizer).
    tokenizer: str | None = None
    chat_template: str | None = None
    #: How message content reaches the template (vLLM's --chat-template-content-format).
    chat_template_content_format: Literal["auto", "string", "openai"] = "auto"
    #: Tool-call and reasoning parsers of the chat layer (vLLM's --enable-auto-tool-choice,
    #: --tool-call-parser, --reasoning-parser, --tool-strict-level).
    parsers: ParserOptions = field(default_factory=ParserOptions)
    #: Multimodal inputs, prepared in this process (vLLM's flags of the same names): the most items of
    #: each modality per prompt, the HF processor's default options, where media may come from.
    limit_mm_per_prompt: dict[str, int] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] = field(default_factory=dict)
    allowed_local_media_path: str = ""
    allowed_media_domains: tuple[str, ...] = ()
    #: Seconds in-flight requests get to finish on SIGTERM/SIGINT before they are aborted.
    shutdown_grace_period: float = 30.0
    max_request_body_bytes: int = 32 << 20
    max_grpc_message_bytes: int = 64 << 20
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    #: Once the Llm is first ready, collect and freeze the heap and space the young collections
    #: (`vllm_server.runtime.freeze_heap`): short and rare collector pauses while streaming.
    #: Process-wide, so off for an embedded server; the CLI turns it on.
    freeze_gc_heap: bool = False
    #: Once the Llm is first ready, move this process off the CPUs its engine bound its threads to
    #: (`vllm_server.affinity.keep_off_engine_cpus`; a CPU engine's forward pass keeps its CPUs).
    #: Process-wide, so off for an embedded server; the CLI turns it on (`--frontend-affinity`).
    keep_off_engine_cpus: bool = False
    #: New requests whose handlers start per event-loop turn on the inference routes; the rest wait for
    #: the next turns in order (`vllm_server.http.admission`). 0: all at once. The CLI sets 4 for a
    #: router (`--remote`), whose wave of new requests would otherwise reach its workers all together.
    prepare_per_turn: int = 0
    #: Observability (vLLM's flags of the same names). uvicorn's access log, one line per request,
    #: except for the paths in `access_log_exclude_paths` (--disable-access-log-for-endpoints).
    access_log: bool = True
    access_log_exclude_paths: tuple[str, ...] = ()
    #: The request log (--enable-log-requests): one line per request with its id, prompt (at most
    #: `max_log_len` characters or token ids) and sampling parameters.
    enable_log_requests: bool = False
    max_log_len: int | None = None
    #: With the request log: each request's output text and finish reason too (--enable-log-outputs),
    #: and each streamed delta (--enable-log-deltas; `vllm_server.request_log.OutputLog`).
    enable_log_outputs: bool = False
    enable_log_deltas: bool = True
    #: Each error response of the app's error handlers logs its stack trace (--log-error-stack).
    log_error_stack: bool = False
    #: `GET /tokenizer_info` is served (--enable-tokenizer-info-endpoint; `vllm_server.tokenizer_info`).
    enable_tokenizer_info_endpoint: bool = False
    #: OpenTelemetry: spans of each request exported over OTLP to this endpoint (--otlp-traces-endpoint).
    otlp_traces_endpoint: str | None = None
    #: Response options (vLLM's flags of the same names): the role of a generated chat message, usage
    #: in every response, tokens in logprobs as "token_id:N", SSE keep-alive comments every N seconds
    #: of silence (0: none), per-request mm_processor_kwargs / media_io_kwargs taken from clients.
    response_role: str = "assistant"
    enable_force_include_usage: bool = False
    #: `/load` counts the inference requests in progress (vLLM's --enable-server-load-tracking);
    #: without it `/load` says 0, as vLLM's does.
    enable_server_load_tracking: bool = False
    return_tokens_as_token_ids: bool = False
    sse_keep_alive_interval: float = 0.0
    trust_request_mm_kwargs: bool = False
    #: Request handling (vLLM's flags of the same names, `vllm_server.frontend_flags`): a request's own
    #: chat template rendered instead of refused, variables every chat template gets under a request's
    #: chat_template_kwargs, no tools for the template when a request's tool_choice is "none".
    trust_request_chat_template: bool = False
    default_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    exclude_tools_when_tool_choice_none: bool = False
    #: The system_fingerprint of chat and completion responses (vLLM's --fingerprint-mode and
    #: --fingerprint-value): full, hash, custom or none.
    fingerprint_mode: str = "full"
    fingerprint_value: str | None = None
    #: Usage carries `prompt_tokens_details` (vLLM's --enable-prompt-tokens-details): the prompt's cached
    #: and cache-creation tokens, and a chat's multimodal tokens; the Anthropic usage's cache fields.
    enable_prompt_tokens_details: bool = False
    #: The reasoning_effort of an Anthropic request with thinking disabled (vLLM's
    #: --anthropic-disabled-thinking-effort): "auto" probes the chat template, as vLLM's.
    anthropic_disabled_thinking_effort: str = "auto"

    def tls(self) -> TlsConfig | None:
        """The TLS settings, if a certificate is configured."""
        if self.ssl_certfile is None or self.ssl_keyfile is None:
            return None
        return TlsConfig(certfile=self.ssl_certfile, keyfile=self.ssl_keyfile, ca_certs=self.ssl_ca_certs)


@dataclass(frozen=True, kw_only=True)
class LoraModule:
    """A LoRA adapter served from startup under its own model name."""

    name: str
    path: str
    base_model_name: str | None = None
    #: A fused 3D MoE adapter (`is_3d_lora_weight` of vLLM's /v1/load_lora_adapter): its requests say so.
    #: Not in /server_info: vLLM's `--lora-modules` entries (LoRAModulePath) have no such field.
    is_3d_lora_weight: bool = field(default=False, metadata={"server_info": False})

    def request(self, lora_int_id: int, *, load_inplace: bool = False) -> LoraRequest:
        """The engine's LoRARequest for this adapter under `lora_int_id` (loading it, or a request's)."""
        return LoraRequest(
            self.name,
            lora_int_id,
            self.path,
            self.base_model_name,
            load_inplace=load_inplace,
            is_3d_lora_weight=self.is_3d_lora_weight,
        )


@dataclass(frozen=True, kw_only=True)
class EngineCoreConfig:
    """The vLLM engine core a worker starts: EngineCoreLlm's settings plus what the server adds."""

    #: The engine's settings. The served model name comes from ServerConfig when it names one (see
    #: `engine_settings`); everything else is the engine's as given, as under `vllm serve`.
    settings: EngineCoreSettings
    #: LoRA adapters loaded at start-up and served under their own model names (vLLM's
    #: `--lora-modules`; they need `--enable-lora`, as under vLLM).
    lora_modules: tuple[LoraModule, ...] = ()

    def engine_settings(self, served_model_name: str | None) -> EngineCoreSettings:
        """The EngineCoreLlm settings of this engine, serving `served_model_name` (ServerConfig's)."""
        return dataclasses.replace(
            self.settings, served_model_name=served_model_name or self.settings.served_model_name
        )

    @property
    def profiler(self) -> str | None:
        """The profiler the engine runs (vLLM's `--profiler-config` `profiler`), if any: it enables
        /start_profile and /stop_profile, as on vLLM's server."""
        config = self.settings.engine_args.get("profiler_config")
        profiler = config.get("profiler") if isinstance(config, dict) else getattr(config, "profiler", None)
        return str(profiler) if profiler is not None else None

    def flat(self) -> dict[str, Any]:
        """The settings as given plus the server's additions (the served name is ServerConfig's)."""
        out = {f.name: getattr(self.settings, f.name) for f in dataclasses.fields(self.settings)}
        del out["served_model_name"]
        return out | {"lora_modules": self.lora_modules}


@dataclass(frozen=True, kw_only=True)
class FrontendConfig:
    """What the CLI builds: the server, and the engine core when it serves one."""

    server: ServerConfig
    engine_core: EngineCoreConfig | None = None

    def engine_settings(self) -> EngineCoreSettings | None:
        """The settings of the engine core this server starts, if it starts one."""
        if self.engine_core is None:
            return None
        names = self.server.served_model_name
        return self.engine_core.engine_settings(names[0] if names else None)

    def flat(self) -> dict[str, Any]:
        """One flat mapping of every setting (for /server_info); secrets redacted."""
        out: dict[str, Any] = {f.name: getattr(self.server, f.name) for f in dataclasses.fields(self.server)}
        if out["api_key"] is not None:
            out["api_key"] = "<redacted>"
        out |= msgspec.to_builtins(out.pop("parsers"))  # flat, as vLLM's flags
        if self.engine_core is not None:
            out |= self.engine_core.flat()  # a shared key (tokenizer) reports the engine's, as it always has
        return {name: _jsonable(value) for name, value in out.items()}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f for f in dataclasses.fields(value) if f.metadata.get("server_info", True)]
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)  # an engine argument of vLLM's own type (an enum, a set, ...), as vLLM logs it
