"""`EngineCoreConfig` over `EngineCoreSettings`: what the server adds, and the flat `/server_info` config."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from vllm_llm import EngineCoreSettings
from vllm_server.cli import serve_config
from vllm_server.config import EngineCoreConfig, LoraModule

#: A directory that exists, for --lora-modules (a local path that does not exist stops the start).
HERE = str(Path(__file__).parent)
WORKER_ARGS = [
    "--model",
    "/models/m",
    "--served-model-name",
    "tiny",
    "alias",
    "--tokenizer",
    "/models/tok",
    "--api-key",
    "secret",
    "--port",
    "0",
    "--enable-lora",
    "--lora-modules",
    f"a={HERE}",
    "--profiler-config",
    '{"profiler": "torch", "torch_profiler_dir": "/prof"}',
    "--dtype",
    "float32",
]


def test_server_info_is_one_flat_mapping_of_both_configs() -> None:
    flat = serve_config(WORKER_ARGS).flat()
    server: dict[str, object] = {
        "host": "127.0.0.1",
        "port": 0,
        "grpc_port": 50051,
        "grpc_host": None,
        "ssl_certfile": None,
        "ssl_keyfile": None,
        "ssl_ca_certs": None,
        "api_key": "<redacted>",
        "served_model_name": ["tiny", "alias"],
        "allowed_origins": [],
        "allow_credentials": False,
        "allowed_methods": ["*"],
        "allowed_headers": ["*"],
        "uds": None,
        "uvicorn_log_level": "info",
        "ssl_cert_reqs": 0,
        "ssl_ciphers": None,
        "enable_ssl_refresh": False,
        "root_path": "",
        "middleware": [],
        "disable_fastapi_docs": False,
        "enable_offline_docs": False,
        "h11_max_incomplete_event_size": 4194304,
        "h11_max_header_count": 256,
        "dev_mode": False,
        "enable_runtime_lora": False,
        "chat_template": None,
        "chat_template_content_format": "auto",
        # the chat layer's parser options, flat as vLLM's flags
        "enable_auto_tool_choice": False,
        "tool_call_parser": None,
        "reasoning_parser": None,
        "tool_strict_level": "auto",
        # multimodal inputs, prepared in this process
        "limit_mm_per_prompt": {},
        "mm_processor_kwargs": {},
        "allowed_local_media_path": "",
        "allowed_media_domains": [],
        "shutdown_grace_period": 30.0,
        "max_request_body_bytes": 32 << 20,
        "max_grpc_message_bytes": 64 << 20,
        "log_level": "info",
        "freeze_gc_heap": True,
        "keep_off_engine_cpus": True,
        "prepare_per_turn": 0,  # a worker's inference routes start every new request at once
        # observability and response options (vLLM's defaults)
        "access_log": True,
        "access_log_exclude_paths": [],
        "enable_log_requests": False,
        "max_log_len": None,
        "enable_log_outputs": False,
        "enable_log_deltas": True,
        "log_error_stack": False,
        "enable_tokenizer_info_endpoint": False,
        "otlp_traces_endpoint": None,
        "response_role": "assistant",
        "enable_force_include_usage": False,
        "enable_server_load_tracking": False,
        "return_tokens_as_token_ids": False,
        "sse_keep_alive_interval": 0.0,
        "trust_request_mm_kwargs": False,
        "trust_request_chat_template": False,
        "default_chat_template_kwargs": {},
        "exclude_tools_when_tool_choice_none": False,
        "fingerprint_mode": "full",
        "fingerprint_value": None,
        "enable_prompt_tokens_details": False,
        "anthropic_disabled_thinking_effort": "auto",
    }
    engine: dict[str, object] = {
        "model": "/models/m",
        "tokenizer": "/models/tok",
        "dtype": "float32",
        "max_model_len": None,
        "data_parallel_size": 1,
        "seed": 0,
        "enforce_eager": False,  # vLLM's default
        "max_num_seqs": None,
        "max_num_batched_tokens": None,
        "enable_prefix_caching": None,
        "enable_lora": True,
        "max_loras": 1,
        "max_lora_rank": 16,
        "lora_modules": [{"name": "a", "path": HERE, "base_model_name": None}],
        "enable_sleep_mode": False,
        "enable_prompt_embeds": False,
        "structured_outputs_backend": "auto",
        "log_stats": True,
        "randomize_request_ids": True,
        "reasoning_parser": None,
        "stream_interval": 1,
    }
    engine_args = flat.pop("engine_args")  # vLLM's engine flags given a value other than vLLM's default
    assert flat == server | engine
    assert engine_args["profiler_config"]["torch_profiler_dir"] == "/prof"


def test_engine_settings_take_the_servers_name_and_nothing_else() -> None:
    modules = tuple(LoraModule(name=f"lora{i}", path=f"/loras/{i}") for i in range(3))
    given = EngineCoreSettings(
        model="/models/m", enable_lora=True, max_loras=2, engine_args={"kv_cache_dtype": "auto"}
    )
    config = EngineCoreConfig(settings=given, lora_modules=modules)
    settings = config.engine_settings("tiny")
    assert settings == dataclasses.replace(given, served_model_name="tiny")  # LoRA as given, as under vLLM
    assert config.settings == given  # derived, not mutated


def test_the_profiler_routes_follow_the_engines_profiler_config() -> None:
    assert EngineCoreConfig(settings=EngineCoreSettings(model="m")).profiler is None
    torch_profiler = {"profiler": "torch", "torch_profiler_dir": "/prof"}
    with_dict = EngineCoreSettings(model="m", engine_args={"profiler_config": torch_profiler})
    assert EngineCoreConfig(settings=with_dict).profiler == "torch"


def test_engine_args_never_repeat_a_named_setting() -> None:
    with pytest.raises(ValueError, match="engine_args repeats named settings: max_loras"):
        EngineCoreSettings(model="m", engine_args={"max_loras": 2})


def test_engine_settings_without_additions_are_the_settings() -> None:
    given = EngineCoreSettings(model="/models/m", served_model_name="own", max_loras=4)
    config = EngineCoreConfig(settings=given)
    assert config.engine_settings(None) == given  # no server name: the settings' own
    assert config.engine_settings("tiny") == dataclasses.replace(given, served_model_name="tiny")


def test_a_server_logs_engine_stats_unless_told_not_to() -> None:
    # /metrics reports the engine's running and waiting requests only when the engine logs stats
    assert EngineCoreSettings(model="m").log_stats is True  # vLLM's default: --disable-log-stats unset
    cli = serve_config(WORKER_ARGS).engine_core
    assert cli is not None and cli.settings.log_stats is True
    quiet = serve_config([*WORKER_ARGS, "--disable-log-stats"]).engine_core
    assert quiet is not None and quiet.settings.log_stats is False


def test_multimodal_flags_reach_the_chat_layer_and_the_engine(tmp_path: Path) -> None:
    args = [
        *WORKER_ARGS,
        *("--limit-mm-per-prompt", '{"image": 2, "video": {"count": 0}}'),
        *("--mm-processor-kwargs", '{"do_resize": false}'),
        *("--allowed-local-media-path", str(tmp_path)),
        *("--allowed-media-domains", "a.example", "b.example"),
    ]
    config = serve_config(args)
    server = config.server
    assert server.limit_mm_per_prompt == {"image": 2, "video": 0}
    assert server.mm_processor_kwargs == {"do_resize": False}
    assert server.allowed_local_media_path == str(tmp_path.resolve())
    assert server.allowed_media_domains == ("a.example", "b.example")
    assert config.engine_core is not None
    engine_args = config.engine_core.settings.engine_args
    assert engine_args["limit_mm_per_prompt"] == {"image": 2, "video": {"count": 0}}
    assert engine_args["mm_processor_kwargs"] == {"do_resize": False}
    assert engine_args["allowed_media_domains"] == ["a.example", "b.example"]


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--limit-mm-per-prompt", '{"image": -1}', "needs a count >= 0"),
        ("--allowed-local-media-path", "/no/such/dir", "does not exist"),
    ],
)
def test_bad_multimodal_flags_stop_the_start(flag: str, value: str, message: str) -> None:
    with pytest.raises(SystemExit) as stopped:
        serve_config([*WORKER_ARGS, flag, value])
    assert message in str(stopped.value)
