"""Server configuration: `ServerConfig` (listeners, TLS, auth, CORS, modes) and `EngineCoreConfig`.

Both have defaults, so embedding the server takes no more than the fields that differ. The CLI builds
them as one `FrontendConfig`; `/server_info` reports them as one flat mapping.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from vllm_llm import EngineCoreSettings
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
    #: Registers the engine-core admin routes (over an engine-core Llm only).
    dev_mode: bool = False
    #: Registers load/unload LoRA routes (over an engine-core Llm only).
    enable_runtime_lora: bool = False
    #: Tokenizer override for the text and chat layers (default: the Llm's LlmInfo.tokenizer).
    tokenizer: str | None = None
    chat_template: str | None = None
    #: Seconds in-flight requests get to finish on SIGTERM/SIGINT before they are aborted.
    shutdown_grace_period: float = 30.0
    max_request_body_bytes: int = 32 << 20
    max_grpc_message_bytes: int = 64 << 20
    log_level: Literal["critical", "error", "warning", "info", "debug"] = "info"
    #: Once the Llm is first ready, collect and freeze the heap (`vllm_server.runtime.freeze_heap`):
    #: short collector pauses while streaming. Process-wide, so off for an embedded server; the CLI
    #: turns it on.
    freeze_gc_heap: bool = False
    #: Once the Llm is first ready, move this process off the CPUs its engine bound its threads to
    #: (`vllm_server.affinity.keep_off_engine_cpus`; a CPU engine's forward pass keeps its CPUs).
    #: Process-wide, so off for an embedded server; the CLI turns it on (`--frontend-affinity`).
    keep_off_engine_cpus: bool = False

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


@dataclass(frozen=True, kw_only=True)
class EngineCoreConfig:
    """The vLLM engine core to start (for a worker)."""

    model: str
    tokenizer: str | None = None
    dtype: str = "auto"
    max_model_len: int | None = None
    data_parallel_size: int = 1
    seed: int = 0
    enforce_eager: bool = True
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    enable_lora: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    lora_modules: tuple[LoraModule, ...] = ()
    enable_sleep_mode: bool = False
    structured_outputs_backend: str = "auto"
    #: Engine stats for /metrics (running and waiting requests, KV-cache usage).
    log_stats: bool = True
    randomize_request_ids: bool = True
    #: Torch profiler output directory; enables /start_profile and /stop_profile in dev mode.
    profiler_dir: str | None = None
    #: Send a request's outputs every this many new tokens (vLLM's `--stream-interval`).
    stream_interval: int = 1
    engine_args: dict[str, Any] = field(default_factory=dict)

    def settings(self, served_model_name: str | None) -> EngineCoreSettings:
        """The EngineCoreLlm settings of this engine."""
        engine_args = dict(self.engine_args)
        if self.profiler_dir is not None:
            engine_args.setdefault(
                "profiler_config", {"profiler": "torch", "torch_profiler_dir": self.profiler_dir}
            )
        return EngineCoreSettings(
            model=self.model,
            tokenizer=self.tokenizer,
            served_model_name=served_model_name,
            dtype=self.dtype,
            max_model_len=self.max_model_len,
            data_parallel_size=self.data_parallel_size,
            seed=self.seed,
            enforce_eager=self.enforce_eager,
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            enable_prefix_caching=self.enable_prefix_caching,
            enable_lora=self.enable_lora or bool(self.lora_modules),
            max_loras=max(self.max_loras, len(self.lora_modules)),
            max_lora_rank=self.max_lora_rank,
            enable_sleep_mode=self.enable_sleep_mode,
            structured_outputs_backend=self.structured_outputs_backend,
            log_stats=self.log_stats,
            randomize_request_ids=self.randomize_request_ids,
            stream_interval=self.stream_interval,
            engine_args=engine_args,
        )


@dataclass(frozen=True, kw_only=True)
class FrontendConfig:
    """What the CLI builds: the server, and the engine core when it serves one."""

    server: ServerConfig
    engine_core: EngineCoreConfig | None = None

    def flat(self) -> dict[str, Any]:
        """One flat mapping of every setting (for /server_info); secrets redacted."""
        out: dict[str, Any] = {}
        for part in (self.server, self.engine_core):
            if part is None:
                continue
            for f in dataclasses.fields(part):
                value = getattr(part, f.name)
                if f.name == "api_key" and value is not None:
                    value = "<redacted>"
                out[f.name] = _jsonable(value)
        return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value
