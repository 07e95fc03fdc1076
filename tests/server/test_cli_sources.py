"""Every `serve` flag either applies to the chosen source or is refused at start-up, saying why.

A flag that cannot apply (an engine flag on a router, a connection flag on a worker) used to be dropped
without a word; a new flag must be classified here before it can ship.
"""

from __future__ import annotations

import pytest

from vllm_server.cli import _parser, frontend_config

#: Flags every source applies (listeners, auth, the text and chat layers, observability, modes).
EVERY_SOURCE = {
    "allow_credentials", "allowed_local_media_path", "allowed_media_domains", "allowed_origins", "api_key",
    "chat_template", "chat_template_content_format", "dev_mode", "disable_access_log_for_endpoints",
    "disable_uvicorn_access_log", "enable_auto_tool_choice", "enable_force_include_usage",
    "enable_log_requests", "enable_request_id_headers", "event_loop", "frontend_affinity", "grpc_host",
    "grpc_port", "host", "limit_mm_per_prompt", "log_level", "max_log_len", "max_request_body_bytes",
    "mm_processor_kwargs", "otlp_traces_endpoint", "port", "prepare_per_turn", "reasoning_parser",
    "response_role", "return_tokens_as_token_ids", "served_model_name", "shutdown_grace_period",
    "sse_keep_alive_interval", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "tokenizer", "tool_call_parser",
    "tool_strict_level", "trust_request_mm_kwargs",
}  # fmt: skip
#: The source flags themselves.
SOURCES = {"model", "remote", "mock"}
#: Per flag of one source only: a value other than its default, and the sources it is refused on.
REFUSED: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    # a worker's engine
    "dtype": (["--dtype", "float32"], ("remote", "mock"), "configure(s) a worker's engine"),
    "data_parallel_size": (
        ["--data-parallel-size", "2"],
        ("remote", "mock"),
        "configure(s) a worker's engine",
    ),
    "seed": (["--seed", "3"], ("remote", "mock"), "configure(s) a worker's engine"),
    "enforce_eager": (["--no-enforce-eager"], ("remote", "mock"), "configure(s) a worker's engine"),
    "max_num_seqs": (["--max-num-seqs", "4"], ("remote", "mock"), "configure(s) a worker's engine"),
    "max_num_batched_tokens": (
        ["--max-num-batched-tokens", "64"],
        ("remote", "mock"),
        "configure(s) a worker's engine",
    ),
    "enable_prefix_caching": (
        ["--enable-prefix-caching"],
        ("remote", "mock"),
        "configure(s) a worker's engine",
    ),
    "enable_sleep_mode": (["--enable-sleep-mode"], ("remote", "mock"), "configure(s) a worker's engine"),
    "structured_outputs_backend": (
        ["--structured-outputs-backend", "xgrammar"],
        ("remote", "mock"),
        "configure(s) a worker's engine",
    ),
    "disable_log_stats": (["--disable-log-stats"], ("remote", "mock"), "configure(s) a worker's engine"),
    "profiler_dir": (["--profiler-dir", "/p"], ("remote", "mock"), "configure(s) a worker's engine"),
    "kv_transfer_config": (
        ["--kv-transfer-config", '{"kv_connector": "NixlConnector"}'],
        ("remote", "mock"),
        "configures a worker's engine",
    ),
    "enable_lora": (["--enable-lora"], ("remote", "mock"), "the LoRA adapters of a worker's engine"),
    "enable_runtime_lora": (["--enable-runtime-lora"], ("remote", "mock"), "the LoRA adapters of a worker"),
    "lora_modules": (
        ["--lora-modules", "a=/a"],
        ("remote", "mock"),
        "the LoRA adapters of a worker's engine",
    ),
    "max_loras": (["--max-loras", "2"], ("remote", "mock"), "the LoRA adapters of a worker's engine"),
    "max_lora_rank": (["--max-lora-rank", "8"], ("remote", "mock"), "the LoRA adapters of a worker's engine"),
    # a model the server runs itself
    "max_model_len": (["--max-model-len", "64"], ("remote",), "a model this server runs itself"),
    "stream_interval": (["--stream-interval", "4"], ("remote",), "a model this server runs itself"),
    # the connection to --remote workers, and how a router picks them
    "remote_timeout": (["--remote-timeout", "3"], ("model", "mock"), "the connection to --remote workers"),
    "remote_idle_timeout": (
        ["--remote-idle-timeout", "3"],
        ("model", "mock"),
        "the connection to --remote workers",
    ),
    "remote_ca_certs": (
        ["--remote-ca-certs", "/ca"],
        ("model", "mock"),
        "the connection to --remote workers",
    ),
    "remote_certfile": (["--remote-certfile", "/c"], ("model", "mock"), "the connection to --remote workers"),
    "remote_keyfile": (["--remote-keyfile", "/k"], ("model", "mock"), "the connection to --remote workers"),
    "remote_api_key": (["--remote-api-key", "k"], ("model", "mock"), "the connection to --remote workers"),
    "remote_prefill": (["--remote-prefill", "127.0.0.1:2"], ("model", "mock"), "needs --remote"),
    "remote_mux": (["--remote-mux"], ("model", "mock"), "the connection to --remote workers"),
    "routing": (["--routing", "prefix"], ("model", "mock"), "pick among --remote workers"),
    "prefix_blocks": (["--prefix-blocks", "8"], ("model", "mock"), ""),
    "outlier_detection": (["--outlier-detection"], ("model", "mock"), "pick among --remote workers"),
}
SOURCE_ARGS = {
    "model": ["--model", "/m"],
    "remote": ["--remote", "127.0.0.1:1"],
    "mock": ["--mock", "--tokenizer", "/t"],
}


def test_every_serve_flag_is_classified() -> None:
    command = next(a for a in _parser()._actions if a.dest == "command")
    assert isinstance(command.choices, dict)
    flags = {a.dest for a in command.choices["serve"]._actions if a.dest != "help"}
    assert flags == EVERY_SOURCE | SOURCES | set(REFUSED)


CASES = [(flag, source) for flag, (_, refused, _) in REFUSED.items() for source in refused]


@pytest.mark.parametrize(("flag", "source"), CASES, ids=[f"{f}-on-{s}" for f, s in CASES])
def test_a_flag_of_another_source_is_refused_saying_why(flag: str, source: str) -> None:
    given, _, why = REFUSED[flag]
    with pytest.raises(SystemExit) as stopped:
        frontend_config(_parser().parse_args(["serve", *SOURCE_ARGS[source], *given]))
    message = str(stopped.value)
    named = given[0].removeprefix("--no-")  # a negated boolean is named by its positive form
    assert message.startswith("Error: ") and named.lstrip("-") in message and why in message, message


ACCEPTED = [
    (flag, source)
    for flag, (given, refused, _) in REFUSED.items()
    for source in SOURCES - set(refused)
    if flag != "prefix_blocks"  # needs --routing prefix as well
]


@pytest.mark.parametrize(("flag", "source"), ACCEPTED, ids=[f"{f}-on-{s}" for f, s in ACCEPTED])
def test_a_flag_of_its_own_source_is_taken(flag: str, source: str) -> None:
    given, _, _ = REFUSED[flag]
    frontend_config(_parser().parse_args(["serve", *SOURCE_ARGS[source], *given]))


@pytest.mark.parametrize("picking", [["--routing", "prefix"], ["--outlier-detection"]])
def test_remote_mux_with_a_flag_that_picks_among_workers_is_refused(picking: list[str]) -> None:
    # One GenerateMux stream goes to one worker: picking among several would silently not happen.
    args = _parser().parse_args(["serve", *SOURCE_ARGS["remote"], "--remote-mux", *picking])
    with pytest.raises(SystemExit, match="--remote-mux sends every request of a target to one worker"):
        frontend_config(args)
