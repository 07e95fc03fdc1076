"""`vllm-frontend serve`: a worker (`--model`), a router frontend (`--remote`) or a demo (`--mock`).

Flags follow `vllm serve` where they overlap. SIGTERM and SIGINT drain and stop the server (exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from vllm_llm import ParserOptions
from vllm_llm.parsers import REASONING_PARSERS, TOOL_PARSERS
from vllm_server import config_file, engine_flags, frontend_flags, runtime
from vllm_server.config import EngineCoreConfig, FrontendConfig, LoraModule, ServerConfig

#: `--prepare-per-turn` of a router (`--remote`): new requests whose handlers start per event-loop turn.
ROUTER_PREPARE_PER_TURN = 4


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (1 with the cause on stderr when the server cannot start)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["serve"]:
        _commands().parse_args(argv)  # help, or an error naming the commands
        return 2
    args = parse_serve_args(argv[1:])
    logging.basicConfig(
        level=(args.log_level or "info").upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    return _serve(args)


def _commands() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm-frontend", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True, dest="command")
    sub.add_parser("serve", help="serve the HTTP API and the gRPC services (vllm-frontend serve --help)")
    return parser


def parse_serve_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse `vllm-frontend serve` arguments (those after `serve`).

    A worker (`--model`) parses with vLLM's engine flags (`engine_flags`); a router or the mock without
    them, and without importing vLLM. `--help` lists them wherever vLLM is installed.
    """
    try:
        config, rest = config_file.split(argv)
        given = [*config_file.flags(config, ()), *rest]  # which source (a --config may name it)
    except config_file.ConfigFileError as exc:
        raise SystemExit(f"Error: {exc}") from None
    worker = any(a == "--model" or a.startswith("--model=") for a in given)
    helping = any(a in ("-h", "--help") or a.startswith("--help=") for a in given)
    sources = any(a.split("=", 1)[0] in ("--remote", "--mock") for a in given)
    engine = worker or (helping and not sources and engine_flags.vllm_installed())
    parser = serve_parser(engine=engine)
    args = parser.parse_args([*config_file.flags(config, parser._option_string_actions), *rest])
    if args.model is not None and not engine:  # --model given some other way (an abbreviation)
        parser = serve_parser(engine=True)
        args = parser.parse_args([*config_file.flags(config, parser._option_string_actions), *rest])
    return args


def serve_parser(*, engine: bool) -> argparse.ArgumentParser:
    """The `serve` parser: with vLLM's engine flags for a worker (`engine`), without for the others."""
    if engine and not engine_flags.vllm_installed():
        raise SystemExit(
            "Error: --model serves a vLLM engine core, and vLLM is not installed in this environment "
            "(install vllm-llm[engine], or serve workers elsewhere with --remote)"
        )
    parser_class = engine_flags.parser_class() if engine else _RouterParser
    parser = parser_class(
        prog="vllm-frontend serve",
        description="Serve the HTTP API and the gRPC services over a vLLM engine core (--model), workers "
        "(--remote) or a MockLlm (--mock). A worker takes every flag of vLLM's engine argument parser "
        + ("(listed below)." if engine else "(listed by --help where vLLM is installed)."),
    )
    for add in _FLAG_GROUPS:
        add(parser)
    if engine:
        engine_flags.add_engine_flags(parser)
    else:
        _shared_engine_flags(parser)
    return parser


class _RouterParser(argparse.ArgumentParser):
    """The parser of a router and the mock: an engine flag is unrecognized, and says whose it is."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments"):
            message += (
                " (vLLM's engine flags configure a worker's engine, with --model; a router's workers "
                "and the mock have their own)"
            )
        super().error(message)


def _source_flags(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="serve a vLLM engine core over this model (a worker)")
    source.add_argument(
        "--remote", metavar="TARGET", help="serve over workers at this gRPC target (a router)"
    )
    source.add_argument("--mock", action="store_true", help="serve a MockLlm with the tiny model's tokenizer")


def _listener_flags(parser: argparse.ArgumentParser) -> None:
    net = parser.add_argument_group("listeners")
    net.add_argument("--host", default="127.0.0.1")
    net.add_argument("--port", type=int, default=8000)
    net.add_argument("--grpc-port", type=int, default=50051, help="0 picks a free port; -1 serves no gRPC")
    net.add_argument("--grpc-host", default=None)
    net.add_argument("--ssl-certfile", type=Path)
    net.add_argument("--ssl-keyfile", type=Path)
    net.add_argument("--ssl-ca-certs", type=Path, help="require gRPC client certificates signed by these CAs")
    net.add_argument("--api-key", default=os.environ.get("VLLM_API_KEY"))
    net.add_argument("--allowed-origins", type=json.loads, default=[], help='JSON list, e.g. ["*"]')
    net.add_argument("--allow-credentials", action=argparse.BooleanOptionalAction, default=False)
    net.add_argument(
        "--shutdown-grace-period",
        type=float,
        default=30.0,
        help="seconds in-flight requests get to finish on SIGTERM / SIGINT (a worker's engine then stops "
        "as vLLM's --shutdown-timeout says)",
    )
    net.add_argument("--max-request-body-bytes", type=int, default=32 << 20)


def _frontend_model_flags(parser: argparse.ArgumentParser) -> None:
    model = parser.add_argument_group("the model as this frontend serves it (vLLM's frontend flags)")
    model.add_argument("--chat-template", help="a chat template file (overrides the tokenizer's)")
    model.add_argument(
        "--lora-modules",
        nargs="+",
        default=[],
        metavar="NAME=PATH",
        help="LoRA adapters loaded at start-up and served as models (a worker, with --enable-lora)",
    )
    chat = parser.add_argument_group("chat parsing (vLLM's flags; the parsers run in this process)")
    chat.add_argument(
        "--chat-template-content-format",
        choices=["auto", "string", "openai"],
        default="auto",
        help="message content as the template reads it: a string or OpenAI-style parts (auto: detected)",
    )
    chat.add_argument(
        "--enable-auto-tool-choice",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="parse tool calls from the output",
    )
    chat.add_argument("--tool-call-parser", help=f"one of {', '.join(sorted(TOOL_PARSERS))}")
    chat.add_argument(
        "--tool-strict-level",
        choices=["auto", "function", "parameter"],
        default="auto",
        help="floor for the structural tags constraining tool calls",
    )


def _shared_engine_flags(parser: argparse.ArgumentParser) -> None:
    """vLLM's engine flags that a router or the mock reads too: a worker takes them from vLLM's parser,
    the others from here, with vLLM's names, types and defaults."""
    shared = parser.add_argument_group("the model (vLLM's flags of the same names)")
    shared.add_argument("--served-model-name", nargs="+", default=None)
    shared.add_argument("--tokenizer")
    shared.add_argument(
        "--reasoning-parser", default="", help=f"one of {', '.join(sorted(REASONING_PARSERS))}"
    )
    shared.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help="the mock's context length (a router takes its workers')",
    )
    shared.add_argument(
        "--stream-interval",
        type=_at_least_one,
        default=1,
        help="send a request's outputs every N new tokens (first and last at once); the mock's",
    )
    shared.add_argument(
        "--limit-mm-per-prompt",
        type=_json_object,
        default={},
        metavar="JSON",
        help="the most items of each modality in one prompt, e.g. '{\"image\": 2}'",
    )
    shared.add_argument(
        "--mm-processor-kwargs", type=_json_object, default=None, metavar="JSON", help="HF processor options"
    )
    shared.add_argument(
        "--allowed-local-media-path", default="", help="a directory file: URLs may read media from"
    )
    shared.add_argument(
        "--allowed-media-domains", nargs="+", default=None, help="the only hosts http(s) media may come from"
    )
    shared.add_argument(
        "--enable-log-requests",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="log each request's prompt and parameters",
    )
    shared.add_argument(
        "--otlp-traces-endpoint",
        default=None,
        metavar="URL",
        help="export OpenTelemetry spans of each request over OTLP (gRPC) to this endpoint",
    )


def _mode_flags(parser: argparse.ArgumentParser) -> None:
    modes = parser.add_argument_group("modes")
    modes.add_argument("--dev-mode", action="store_true", default=_env_flag("VLLM_SERVER_DEV_MODE"))
    modes.add_argument(
        "--enable-runtime-lora",
        action="store_true",
        default=_env_flag("VLLM_ALLOW_RUNTIME_LORA_UPDATING"),
        help="the LoRA load/unload routes (a worker; its engine needs --enable-lora, as under vLLM)",
    )
    modes.add_argument(
        "--log-level",
        type=str.lower,
        default=None,
        choices=["critical", "error", "warning", "info", "debug"],
        help="this process's log level (default info); a worker's vLLM logs at it too (vLLM's flag)",
    )
    modes.add_argument(
        "--event-loop",
        default="auto",
        choices=runtime.EVENT_LOOPS,
        help="auto: uvloop when installed (as uvicorn's and vLLM's servers), else asyncio's own",
    )
    modes.add_argument(
        "--frontend-affinity",
        default="auto",
        choices=["auto", "off"],
        help="auto: once the engine is ready, keep this process off the CPUs the engine's workers bound "
        "themselves to (vLLM's CPU backend binds the forward pass, GPU workers only with NUMA binding; "
        "where nothing is bound nothing changes); off: leave the placement to the OS",
    )
    modes.add_argument(
        "--prepare-per-turn",
        type=_at_least_zero,
        default=None,
        metavar="N",
        help="at most N new requests start their handlers per event-loop turn on the inference routes; "
        "the rest wait for the next turns in order, so a burst of new requests does not hold the loop "
        f"(0: all at once; default: {ROUTER_PREPARE_PER_TURN} with --remote, where a burst would reach "
        "the workers all together, else 0)",
    )


def _observability_flags(parser: argparse.ArgumentParser) -> None:
    observe = parser.add_argument_group("observability (vLLM's flags)")
    observe.add_argument(
        "--disable-uvicorn-access-log",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="no access log",
    )
    observe.add_argument(
        "--disable-access-log-for-endpoints",
        default="",
        metavar="PATHS",
        help='comma-separated paths left out of the access log, e.g. "/health,/metrics"',
    )
    observe.add_argument(
        "--max-log-len",
        type=int,
        default=None,
        help="the most prompt characters or token ids a request log line shows (default: all)",
    )
    observe.add_argument(
        "--enable-request-id-headers",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="accepted for vLLM's CLI: X-Request-Id is always echoed on responses",
    )


def _response_flags(parser: argparse.ArgumentParser) -> None:
    response = parser.add_argument_group("responses (vLLM's flags)")
    response.add_argument("--response-role", default="assistant", help="the role of a generated chat message")
    response.add_argument(
        "--enable-force-include-usage",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="usage in every response, streamed too",
    )
    response.add_argument(
        "--enable-server-load-tracking",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="/load counts the inference requests in progress (else it says 0, as vLLM's)",
    )
    response.add_argument(
        "--return-tokens-as-token-ids",
        action=argparse.BooleanOptionalAction,
        default=False,
        help='logprobs name their tokens "token_id:N" (for tokens that are not valid text)',
    )
    response.add_argument(
        "--sse-keep-alive-interval",
        type=_seconds,
        default=0,
        help="send an SSE comment every N seconds a stream is silent (0: never)",
    )
    response.add_argument(
        "--trust-request-mm-kwargs",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="take mm_processor_kwargs and media_io_kwargs from requests (refused otherwise)",
    )


def _remote_flags(parser: argparse.ArgumentParser) -> None:
    remote = parser.add_argument_group("remote workers (--remote)")
    remote.add_argument("--remote-timeout", type=float, default=None, help="per-call deadline in seconds")
    remote.add_argument(
        "--remote-idle-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="cancel a running request (503) when its worker sends no output for this long; 0: never "
        "(default: RemoteLlm's, 120 s: a preempted or paused request goes quiet legitimately)",
    )
    remote.add_argument("--remote-ca-certs", type=Path, help="CA bundle that worker certificates chain to")
    remote.add_argument("--remote-certfile", type=Path, help="client certificate for mTLS to the workers")
    remote.add_argument("--remote-keyfile", type=Path)
    remote.add_argument("--remote-api-key", default=None)
    remote.add_argument(
        "--remote-prefill",
        metavar="TARGET",
        help="prefill/decode disaggregation: prefill every request on workers at this gRPC target (started "
        "with --kv-transfer-config), then decode it on the --remote workers with the KV cache it made",
    )
    remote.add_argument(
        "--routing",
        choices=["round_robin", "prefix"],
        default="round_robin",
        help="how a worker is picked: in turn, or by the prompt's leading KV blocks (gRPC ring_hash), "
        "for prefix-cache hits",
    )
    remote.add_argument(
        "--prefix-blocks",
        type=_at_least_one,
        default=4,
        help="--routing prefix: how many leading KV blocks of a prompt pick its worker",
    )
    remote.add_argument(
        "--remote-mux",
        action="store_true",
        help="send every request on one GenerateMux stream per target (one gRPC message per write for all "
        "requests, not one per token per request): for a target that is ONE worker, since one stream goes "
        "to one worker; a worker without GenerateMux gets a Generate call per request",
    )
    remote.add_argument(
        "--outlier-detection",
        action="store_true",
        help="eject workers whose calls keep failing for a while (gRPC's outlier_detection; it has no "
        "panic mode: an ejected worker stays out even when it is the only one left)",
    )


#: The CLI's own flag groups, every source.
_FLAG_GROUPS: tuple[Callable[[argparse.ArgumentParser], None], ...] = (
    _source_flags,
    _listener_flags,
    _frontend_model_flags,
    _mode_flags,
    _observability_flags,
    _response_flags,
    _remote_flags,
    frontend_flags.add_flags,
)


def _seconds(value: str) -> float:
    """A duration flag: seconds >= 0 (for --remote-idle-timeout, 0 turns the bound off)."""
    seconds = float(value)
    if not 0 <= seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number of seconds >= 0, not {value!r}")
    return seconds


def _integer_at_least(low: int) -> Callable[[str], int]:
    """An integer flag's parser that refuses values below `low` (--stream-interval, --prepare-per-turn)."""

    def parse(value: str) -> int:
        n = int(value)
        if n < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, not {value!r}")
        return n

    return parse


_at_least_zero = _integer_at_least(0)
_at_least_one = _integer_at_least(1)


def _prepare_per_turn(args: argparse.Namespace) -> int:
    """`--prepare-per-turn`, or its default: `ROUTER_PREPARE_PER_TURN` for a router, else 0 (off)."""
    if args.prepare_per_turn is not None:
        return int(args.prepare_per_turn)
    return ROUTER_PREPARE_PER_TURN if args.remote is not None else 0


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def serve_config(argv: Sequence[str]) -> FrontendConfig:
    """The FrontendConfig `vllm-frontend serve` builds from `argv` (its arguments after `serve`)."""
    return frontend_config(parse_serve_args(argv))


def frontend_config(args: argparse.Namespace) -> FrontendConfig:
    """The FrontendConfig of parsed `serve` arguments (`parse_serve_args`); SystemExit (exit code 1,
    the cause as its message) for a configuration that cannot serve."""
    _check_source_flags(args)
    frontend_flags.refuse(args, worker=args.model is not None)
    tokenizer = args.tokenizer
    if args.mock and tokenizer is None:
        tokenizer = _mock_tokenizer()
    server = ServerConfig(
        freeze_gc_heap=True,  # this process is the server's own
        keep_off_engine_cpus=args.frontend_affinity == "auto",
        prepare_per_turn=_prepare_per_turn(args),
        host=args.host,
        port=args.port,
        grpc_port=None if args.grpc_port < 0 else args.grpc_port,
        grpc_host=args.grpc_host,
        ssl_certfile=_readable(args.ssl_certfile, "--ssl-certfile"),
        ssl_keyfile=_readable(args.ssl_keyfile, "--ssl-keyfile"),
        ssl_ca_certs=_readable(args.ssl_ca_certs, "--ssl-ca-certs"),
        api_key=args.api_key,
        served_model_name=tuple(args.served_model_name or ()),
        allowed_origins=tuple(args.allowed_origins),
        allow_credentials=args.allow_credentials,
        allowed_methods=tuple(args.allowed_methods),
        allowed_headers=tuple(args.allowed_headers),
        uds=args.uds,
        uvicorn_log_level=args.uvicorn_log_level,
        ssl_cert_reqs=args.ssl_cert_reqs,
        ssl_ciphers=args.ssl_ciphers,
        enable_ssl_refresh=args.enable_ssl_refresh,
        root_path=args.root_path or "",
        middleware=tuple(frontend_flags.value(args, "--middleware")),
        disable_fastapi_docs=args.disable_fastapi_docs,
        enable_offline_docs=args.enable_offline_docs,
        h11_max_incomplete_event_size=args.h11_max_incomplete_event_size,
        h11_max_header_count=args.h11_max_header_count,
        dev_mode=args.dev_mode,
        enable_runtime_lora=args.enable_runtime_lora,
        tokenizer=tokenizer,
        chat_template=_chat_template(args.chat_template),
        chat_template_content_format=args.chat_template_content_format,
        parsers=_parser_options(args),
        limit_mm_per_prompt=_limits(args.limit_mm_per_prompt or {}),
        mm_processor_kwargs=dict(args.mm_processor_kwargs or {}),
        allowed_local_media_path=_media_dir(args.allowed_local_media_path or ""),
        allowed_media_domains=tuple(args.allowed_media_domains or ()),
        shutdown_grace_period=args.shutdown_grace_period,
        max_request_body_bytes=args.max_request_body_bytes,
        log_level=args.log_level or "info",
        access_log=not args.disable_uvicorn_access_log,
        access_log_exclude_paths=tuple(
            p.strip() for p in args.disable_access_log_for_endpoints.split(",") if p.strip()
        ),
        enable_log_requests=args.enable_log_requests,
        max_log_len=args.max_log_len,
        enable_log_outputs=args.enable_log_outputs,
        enable_log_deltas=args.enable_log_deltas,
        log_error_stack=args.log_error_stack,
        enable_tokenizer_info_endpoint=args.enable_tokenizer_info_endpoint,
        otlp_traces_endpoint=args.otlp_traces_endpoint,
        response_role=args.response_role,
        enable_force_include_usage=args.enable_force_include_usage,
        enable_server_load_tracking=args.enable_server_load_tracking,
        return_tokens_as_token_ids=args.return_tokens_as_token_ids,
        sse_keep_alive_interval=args.sse_keep_alive_interval,
        trust_request_mm_kwargs=args.trust_request_mm_kwargs,
        trust_request_chat_template=args.trust_request_chat_template,
        default_chat_template_kwargs=dict(args.default_chat_template_kwargs or {}),
        exclude_tools_when_tool_choice_none=args.exclude_tools_when_tool_choice_none,
        fingerprint_mode=args.fingerprint_mode,
        fingerprint_value=args.fingerprint_value,
        enable_prompt_tokens_details=args.enable_prompt_tokens_details,
        anthropic_disabled_thinking_effort=args.anthropic_disabled_thinking_effort,
    )
    if args.model is None:
        return FrontendConfig(server=server)
    fields = engine_flags.engine_fields(args)
    settings = engine_flags.engine_settings(
        fields, randomize_request_ids=not _env_flag("VLLM_DISABLE_REQUEST_ID_RANDOMIZATION")
    )
    lora_modules = tuple(_lora_module(m) for m in args.lora_modules)
    if lora_modules and not settings.enable_lora:
        raise SystemExit("Error: --lora-modules: LoRA is not enabled. Use --enable-lora to enable LoRA.")
    engine = EngineCoreConfig(settings=settings, lora_modules=lora_modules)
    return FrontendConfig(server=server, engine_core=engine)


def _check_source_flags(args: argparse.Namespace) -> None:
    """Refuse (SystemExit) what cannot apply to the chosen source, saying why."""
    if args.model is None:
        _refuse_engine_lora_flags(args)
    _refuse_flags_of_another_source(args)
    if args.remote is None and (
        args.routing != "round_robin" or args.prefix_blocks != 4 or args.outlier_detection
    ):
        raise SystemExit(
            "Error: --routing, --prefix-blocks and --outlier-detection pick among --remote workers"
        )
    if args.remote_mux and (args.routing != "round_robin" or args.outlier_detection):
        raise SystemExit(
            "Error: --remote-mux sends every request of a target to one worker; --routing prefix and "
            "--outlier-detection pick among several"
        )
    if args.remote is None and args.remote_prefill is not None:
        raise SystemExit("Error: --remote-prefill needs --remote (the decode workers)")
    if args.enable_log_outputs and not args.enable_log_requests:
        raise SystemExit("Error: --enable-log-outputs requires --enable-log-requests")  # vLLM's words
    if args.prefix_blocks != 4 and args.routing != "prefix":
        raise SystemExit("Error: --prefix-blocks applies to --routing prefix only")
    for flag, target in (("--remote", args.remote), ("--remote-prefill", args.remote_prefill)):
        if target is not None:
            _check_target(flag, target)
    for flag in ("remote_ca_certs", "remote_certfile", "remote_keyfile"):
        _readable(getattr(args, flag), "--" + flag.replace("_", "-"))
    if args.otlp_traces_endpoint is not None:
        from vllm_server.tracing import TracingConfigError, check_endpoint

        try:
            check_endpoint(args.otlp_traces_endpoint)
        except TracingConfigError as exc:
            raise SystemExit(f"Error: {exc}") from None


def _check_target(flag: str, target: str) -> None:
    from vllm_remote_llm import InvalidTarget, check_target

    try:
        check_target(target)
    except InvalidTarget as exc:
        raise SystemExit(f"Error: {flag} {target!r}: {exc}") from None


def _readable(path: Path | None, flag: str) -> Path | None:
    """A file a flag names, checked now: a start-up that cannot read it says so and stops."""
    if path is None:
        return None
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise SystemExit(f"Error: {flag} {str(path)!r} cannot be read: {exc.strerror or exc}") from None
    return path


def _mock_tokenizer() -> str:
    try:  # the tiny model is test support, which a server install does not carry
        from vllm_frontend_testing.tiny_model import build_tiny_model
    except ModuleNotFoundError as exc:
        if exc.name != "vllm_frontend_testing":
            raise
        raise SystemExit(
            "Error: --mock without --tokenizer serves the tiny model's tokenizer, from "
            "vllm-frontend-testing, which is not installed: pass --tokenizer DIR"
        ) from None
    return str(build_tiny_model())


def _parser_options(args: argparse.Namespace) -> ParserOptions:
    options = ParserOptions(
        enable_auto_tool_choice=args.enable_auto_tool_choice,
        tool_call_parser=args.tool_call_parser,
        reasoning_parser=args.reasoning_parser or None,
        tool_strict_level=args.tool_strict_level,
    )
    try:
        options.check()
    except ValueError as exc:
        raise SystemExit(f"Error: {exc}") from None
    return options


#: The CLI's LoRA flags of a worker, with their defaults (vLLM's engine's own LoRA flags exist only in
#: a worker's parser).
_WORKER_LORA_FLAGS = {"lora_modules": [], "enable_runtime_lora": False}


def _refuse_engine_lora_flags(args: argparse.Namespace) -> None:
    """A router (or the mock) has no engine to load adapters into: its adapters are its workers'."""
    given = _given(args, _WORKER_LORA_FLAGS)
    if given:
        raise SystemExit(
            f"Error: {', '.join(given)} configure(s) the LoRA adapters of a worker's engine (--model); "
            "a router serves the adapters its workers serve (start the workers with them)"
        )


#: Flags of the model a server runs itself (--model, or the --mock's): a router takes its workers'.
_OWN_MODEL_FLAGS = {"max_model_len": None, "stream_interval": 1}
#: Flags of the connection to --remote workers.
_REMOTE_FLAGS = {
    "remote_timeout": None,
    "remote_idle_timeout": None,
    "remote_ca_certs": None,
    "remote_certfile": None,
    "remote_keyfile": None,
    "remote_api_key": None,
    "remote_mux": False,
}


def _refuse_flags_of_another_source(args: argparse.Namespace) -> None:
    """A flag that cannot apply to the chosen source is an error, not a flag silently dropped."""
    source = "--model" if args.model is not None else "--remote" if args.remote is not None else "--mock"
    checks = (
        (_OWN_MODEL_FLAGS, args.remote is not None, "configure(s) a model this server runs itself; a router "
         "serves its workers' (start the workers with them)"),
        (_REMOTE_FLAGS, args.remote is None, "configure(s) the connection to --remote workers"),
    )  # fmt: skip
    for flags, refused, why in checks:
        given = _given(args, flags)
        if refused and given:
            raise SystemExit(f"Error: {', '.join(given)} {why}; they do not apply to {source}")


def _given(args: argparse.Namespace, defaults: dict[str, Any]) -> list[str]:
    """The flags among `defaults` given a value other than their default."""
    return [f"--{name.replace('_', '-')}" for name, value in defaults.items() if getattr(args, name) != value]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _limits(value: dict[str, Any]) -> dict[str, int]:
    """--limit-mm-per-prompt: a count per modality (vLLM also takes {"count": N, ...} per modality)."""
    out: dict[str, int] = {}
    for modality, limit in value.items():
        count = limit.get("count") if isinstance(limit, dict) else limit
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise SystemExit(f"Error: --limit-mm-per-prompt: {modality!r} needs a count >= 0, got {limit!r}")
        out[modality] = count
    return out


def _media_dir(path: str) -> str:
    """--allowed-local-media-path checked at start-up, with vLLM's messages (the loader's own check)."""
    if not path:
        return ""
    from vllm_llm.multimodal import MediaOptions

    try:
        return MediaOptions.from_env(allowed_local_media_path=path).allowed_local_media_path
    except ValueError as exc:
        raise SystemExit(f"Error: {exc}") from None


def _chat_template(value: str | None) -> str | None:
    """--chat-template as vLLM reads it: a file, else the template itself (when it looks like one)."""
    if not value:
        return None
    try:
        return Path(value).read_text(encoding="utf-8")
    except OSError as exc:
        if any(c in value for c in "{}\n"):
            return value  # an inline template, as vLLM's load_chat_template takes it
        raise SystemExit(f"Error: --chat-template {value!r} cannot be read: {exc.strerror or exc}") from None


def _lora_module(spec: str) -> LoraModule:
    """One --lora-modules entry (vLLM's forms: NAME=PATH, or a JSON object with name, path and
    base_model_name); a local path that does not exist stops the start before the engine loads."""
    if spec.startswith("{"):
        try:
            data: dict[str, Any] = json.loads(spec)
            module = LoraModule(
                name=data["name"], path=data["path"], base_model_name=data.get("base_model_name")
            )
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise SystemExit(
                f"Error: --lora-modules: {spec!r} is not a JSON object with name and path ({exc})"
            ) from None
    else:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"Error: --lora-modules: expected NAME=PATH, got {spec!r}")
        module = LoraModule(name=name, path=path)
    local = Path(module.path).expanduser()
    if (local.is_absolute() or module.path.startswith(".")) and not local.is_dir():
        raise SystemExit(  # a hub id (org/name) is not a local path; vLLM downloads those
            f"Error: --lora-modules: the LoRA adapter {module.name!r} has no directory {module.path!r}"
        )
    return module


def _serve(args: argparse.Namespace) -> int:
    config = frontend_config(args)
    return runtime.run(_run(config, args), args.event_loop)


async def _run(config: FrontendConfig, args: argparse.Namespace) -> int:
    from vllm_llm import Llm
    from vllm_server.pending import PendingLlm
    from vllm_server.server import Server
    from vllm_server.source import LlmSource
    from vllm_server.state import StartupError

    shutdown = asyncio.Event()
    loop = asyncio.get_running_loop()
    logging.getLogger(__name__).info("event loop: %s.%s", type(loop).__module__, type(loop).__qualname__)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, shutdown.set)
    provided: Llm | None = None
    connecting: asyncio.Task[Llm] | None = None
    if config.engine_core is not None:
        source = LlmSource.engine_core(config.engine_core)
    elif args.mock:
        provided = _mock_llm(config, args)
        source = LlmSource.provided(provided)
    else:  # a router: it listens at once, unready until a worker serves (vllm_server.pending)
        targets = " and ".join(t for t in (args.remote, args.remote_prefill) if t is not None)
        pending = PendingLlm(lambda: _remote_llm(args), what=f"workers at {targets}")
        provided = pending
        connecting = asyncio.create_task(pending.connected())
        connecting.add_done_callback(lambda task: _stop_if_failed(task, shutdown))
        source = LlmSource.provided(provided)
    try:
        await Server(config, source).serve(shutdown)
    except StartupError as exc:
        raise SystemExit(f"Error: {exc}") from None
    finally:
        if provided is not None:
            await provided.shutdown()
    failed = connecting.exception() if connecting is not None and connecting.done() else None
    if failed is not None:
        raise SystemExit(f"Error: the workers cannot be served: {failed}")
    return 0


def _stop_if_failed(task: asyncio.Task[Any], shutdown: asyncio.Event) -> None:
    """Stop the server when connecting to its workers failed for good (the CLI then exits 1)."""
    if not task.cancelled() and task.exception() is not None:
        shutdown.set()


def _mock_llm(config: FrontendConfig, args: argparse.Namespace) -> Any:
    from vllm_llm import MockLlm
    from vllm_llm.text import TextTokenizer
    from vllm_llm.wire import WIRE_REVISION, LlmInfo, ModelDtype

    tokenizer_dir = config.server.tokenizer
    assert tokenizer_dir is not None
    try:
        tok = TextTokenizer.from_dir(Path(tokenizer_dir))
    except Exception as exc:
        raise SystemExit(f"Error: the tokenizer {tokenizer_dir!r} cannot be loaded ({exc})") from None
    info = LlmInfo(
        model="mock",
        served_model_name=(config.server.served_model_name or ("mock",))[0],
        tokenizer=tokenizer_dir,
        dtype=ModelDtype.FLOAT32,
        max_model_len=args.max_model_len or 512,
        vocab_size=tok.vocab_size,
        eos_token_id=tok.eos_token_id,
        wire_revision=WIRE_REVISION,
    )
    return MockLlm(info=info, step_interval=0.01, stream_interval=args.stream_interval)


async def _remote_llm(args: argparse.Namespace) -> Any:
    """The router's Llm over its workers: a RemoteLlm, or prefill and decode ones; `Unavailable` while
    no worker serves yet (the caller waits), another `LlmError` for what waiting cannot change."""
    from vllm_llm import Unsupported
    from vllm_llm.disaggregated import DisaggregatedLlm, IncompatibleWorkers, check_compatible
    from vllm_remote_llm import RemoteLlm, RemoteTls
    from vllm_remote_llm.remote import DEFAULT_IDLE_TIMEOUT, DEFAULT_OUTLIER_DETECTION

    idle = args.remote_idle_timeout
    tls = None
    if args.remote_ca_certs or args.remote_certfile:
        tls = RemoteTls(
            root_certificates=args.remote_ca_certs.read_bytes() if args.remote_ca_certs else None,
            certificate_chain=args.remote_certfile.read_bytes() if args.remote_certfile else None,
            private_key=args.remote_keyfile.read_bytes() if args.remote_keyfile else None,
        )

    async def connect(target: str) -> RemoteLlm:
        return await RemoteLlm.connect(
            target,
            tls=tls,
            api_key=args.remote_api_key,
            timeout=args.remote_timeout,
            idle_timeout=DEFAULT_IDLE_TIMEOUT if idle is None else idle or None,  # 0: no bound
            routing=args.routing,
            prefix_blocks=args.prefix_blocks,
            outlier_detection=DEFAULT_OUTLIER_DETECTION if args.outlier_detection else None,
            mux=args.remote_mux,
        )

    decode = await connect(args.remote)
    if args.remote_prefill is None:
        return decode
    try:
        prefill = await connect(args.remote_prefill)
    except BaseException:
        await decode.shutdown()
        raise
    try:
        check_compatible(prefill.info(), decode.info())
    except IncompatibleWorkers as exc:
        await asyncio.gather(prefill.shutdown(), decode.shutdown())
        raise Unsupported(str(exc)) from None
    return DisaggregatedLlm(prefill, decode)


if __name__ == "__main__":
    sys.exit(main())
