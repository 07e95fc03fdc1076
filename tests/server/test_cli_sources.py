"""Every `serve` flag either applies to the chosen source or is refused at start-up, saying why.

A flag that cannot apply (an engine flag on a router, a connection flag on a worker) used to be dropped
without a word; a new flag must be classified here before it can ship.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_server.cli import serve_config, serve_parser
from vllm_server.frontend_flags import FLAGS

#: Flags every source applies (listeners, auth, the text and chat layers, observability, modes).
EVERY_SOURCE = {
    "allow_credentials", "allowed_local_media_path", "allowed_media_domains", "allowed_origins", "api_key",
    "chat_template", "chat_template_content_format", "dev_mode", "disable_access_log_for_endpoints",
    "disable_uvicorn_access_log", "enable_auto_tool_choice", "enable_force_include_usage",
    "enable_log_requests", "enable_server_load_tracking", "enable_request_id_headers", "event_loop",
    "frontend_affinity", "grpc_host",
    "grpc_port", "host", "limit_mm_per_prompt", "log_level", "max_log_len", "max_request_body_bytes",
    "mm_processor_kwargs", "otlp_traces_endpoint", "port", "prepare_per_turn", "reasoning_parser",
    "response_role", "return_tokens_as_token_ids", "served_model_name", "shutdown_grace_period",
    "sse_keep_alive_interval", "ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "tokenizer", "tool_call_parser",
    "tool_strict_level", "trust_request_mm_kwargs",
    # vllm_server.frontend_flags (every one of them applies everywhere so far; the refused ones are refused
    # everywhere: tests/server/test_frontend_flags.py)
    "config", "uds", "uvicorn_log_level", "allowed_methods", "allowed_headers", "enable_ssl_refresh",
    "ssl_cert_reqs", "ssl_ciphers", "root_path", "middleware", "disable_fastapi_docs",
    "h11_max_incomplete_event_size", "h11_max_header_count", "enable_offline_docs",
    "enable_tokenizer_info_endpoint", "enable_log_outputs", "enable_log_deltas", "log_error_stack",
    "trust_request_chat_template", "default_chat_template_kwargs", "exclude_tools_when_tool_choice_none",
    "fingerprint_mode", "fingerprint_value", "enable_prompt_tokens_details",
    "anthropic_disabled_thinking_effort",
} | {flag.dest for flag in FLAGS if flag.refused}  # fmt: skip
#: The source flags themselves.
SOURCES = {"model", "remote", "mock"}
#: Per flag of one source only: a value other than its default, and the sources it is refused on.
#: (vLLM's engine flags exist only in a worker's parser: `test_engine_flags.py`.)
REFUSED: dict[str, tuple[list[str], tuple[str, ...], str]] = {
    # a worker's LoRA adapters
    "enable_runtime_lora": (["--enable-runtime-lora"], ("remote", "mock"), "the LoRA adapters of a worker"),
    "lora_modules": (
        ["--lora-modules", f"a={Path(__file__).parent}"],
        ("remote", "mock"),
        "the LoRA adapters of a worker's engine",
    ),
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
        ["--remote-ca-certs", __file__],
        ("model", "mock"),
        "the connection to --remote workers",
    ),
    "remote_certfile": (
        ["--remote-certfile", __file__],
        ("model", "mock"),
        "the connection to --remote workers",
    ),
    "remote_keyfile": (
        ["--remote-keyfile", __file__],
        ("model", "mock"),
        "the connection to --remote workers",
    ),
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
    flags = {a.dest for a in serve_parser(engine=False)._actions if a.dest != "help"}
    assert flags == EVERY_SOURCE | SOURCES | set(REFUSED)


def test_a_worker_takes_every_flag_of_the_others() -> None:
    # ... from vLLM's engine parser where vLLM has the flag (--served-model-name, --tokenizer, ...)
    flags = {a.dest for a in serve_parser(engine=True)._actions}
    assert flags >= EVERY_SOURCE | SOURCES | set(REFUSED)


CASES = [(flag, source) for flag, (_, refused, _) in REFUSED.items() for source in refused]


@pytest.mark.parametrize(("flag", "source"), CASES, ids=[f"{f}-on-{s}" for f, s in CASES])
def test_a_flag_of_another_source_is_refused_saying_why(flag: str, source: str) -> None:
    given, _, why = REFUSED[flag]
    with pytest.raises(SystemExit) as stopped:
        serve_config([*SOURCE_ARGS[source], *given])
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
    extra = ["--enable-lora"] if source == "model" and flag == "lora_modules" else []
    serve_config([*SOURCE_ARGS[source], *given, *extra])


@pytest.mark.parametrize("picking", [["--routing", "prefix"], ["--outlier-detection"]])
def test_remote_mux_with_a_flag_that_picks_among_workers_is_refused(picking: list[str]) -> None:
    # One GenerateMux stream goes to one worker: picking among several would silently not happen.
    with pytest.raises(SystemExit, match="--remote-mux sends every request of a target to one worker"):
        serve_config([*SOURCE_ARGS["remote"], "--remote-mux", *picking])
