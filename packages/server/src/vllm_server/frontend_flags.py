"""vLLM's frontend flags (`vllm serve`'s own, beside its engine flags), in one table.

Each `Flag` holds a flag as vLLM 0.32's parser defines it (`vllm.entrypoints.launchers.cli_args`: its
names, type, default and choices; `tests/server/test_frontend_flags.py` compares them with vLLM's parser)
with this server's help text and where it applies: a worker (`--model`), a router (`--remote`) and the
mock, or all of them. The CLI's parser adds them from here (`add_flags`), refuses one given where it does
not apply (`refuse`), and `docs/frontend-flags.md` is this table rendered (`markdown`;
`python -m vllm_server.frontend_flags` writes it).

The CLI's older flags are still defined in `vllm_server.cli`; they move here group by group.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: Where a flag applies: every source, a worker only, or a router (and the mock) only.
Where = Literal["all", "worker", "router"]

_WHERE_TEXT = {"all": "worker, router, mock", "worker": "worker", "router": "router, mock"}


@dataclass(frozen=True, kw_only=True)
class Flag:
    """One frontend flag: vLLM's definition of it, and what it does here."""

    #: The option strings, the long name first (vLLM's `--no-` form of a boolean is added for it).
    names: tuple[str, ...]
    #: What the flag does on this server.
    help: str
    group: str
    default: Any = None
    #: Parses the value; None for a string (or a boolean flag).
    type: Callable[[str], Any] | None = None
    choices: tuple[Any, ...] | None = None
    #: `--x` / `--no-x` (vLLM's BooleanOptionalAction).
    boolean: bool = False
    #: Given several times, the values add up (vLLM's `action="append"`).
    append: bool = False
    #: `--x` alone, no `--no-x` (vLLM's `action="store_true"`).
    switch: bool = False
    metavar: str | None = None
    where: Where = "all"
    #: Why a value other than the default (and `allowed`) cannot apply to this frontend: the start is
    #: refused, naming the flag, rather than the flag accepted and ignored.
    refused: str | None = None
    allowed: tuple[Any, ...] = ()

    @property
    def name(self) -> str:
        return self.names[0]

    @property
    def dest(self) -> str:
        return self.name.removeprefix("--").replace("-", "_")


def _json_list(value: str) -> list[Any]:
    parsed = json.loads(value)
    if not isinstance(parsed, list):
        raise argparse.ArgumentTypeError(f"must be a JSON list, not {value!r}")
    return parsed


def _json_object(value: str) -> dict[str, Any]:
    parsed = json.loads(value)
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, not {value!r}")
    return parsed


_TRANSPORT = "start-up and transport (vLLM's flags)"
_CHAT = "request handling: chat templates (vLLM's flags)"
_RESPONSES = "responses (vLLM's flags)"
_LOGGING = "request handling: logging and tokenizer info (vLLM's flags)"
_REFUSED = "vLLM's flags for what this frontend does not run (only their defaults are taken)"
_POOLING = "pooling models are not served; generation only"
_DP_SUPERVISOR = (
    "vLLM's data-parallel supervisor (API servers over data-parallel engines) is not run: a worker's "
    "engines are data parallel within it (--data-parallel-size), and routers (--remote) scale out over "
    "workers"
)
_COHERE = "the Cohere API (/v2/chat, /v2/embed) is not served"
_SCALE_OUT = (
    "vLLM's token-in/token-out scale-out endpoints (/inference/v1/generate, /render) are not served; "
    "a router reaches its workers over gRPC (vllm.internal.Llm)"
)

#: The table. Order: vLLM's, within each group.
FLAGS: tuple[Flag, ...] = (
    Flag(
        names=("--config",),
        group=_TRANSPORT,
        metavar="FILE.yaml",
        help="read options from a YAML file as vLLM does (each key a flag, dashes or underscores; true a "
        "switch, false its --no- form, a list several values, a mapping JSON); the command line's flags "
        "win over the file's, which a router and the mock read alike (vllm_server.config_file)",
    ),
    Flag(
        names=("--uds",),
        group=_TRANSPORT,
        metavar="PATH",
        help="serve HTTP on this Unix domain socket instead of --host/--port (gRPC stays on its port)",
    ),
    Flag(
        names=("--uvicorn-log-level",),
        group=_TRANSPORT,
        default="info",
        choices=("critical", "error", "warning", "info", "debug", "trace"),
        help="the level of uvicorn's loggers: its start-up lines, errors and access log",
    ),
    Flag(
        names=("--allowed-methods",),
        group=_TRANSPORT,
        default=["*"],
        type=_json_list,
        metavar="JSON",
        help="CORS: the methods a cross-origin request may use (a JSON list)",
    ),
    Flag(
        names=("--allowed-headers",),
        group=_TRANSPORT,
        default=["*"],
        type=_json_list,
        metavar="JSON",
        help="CORS: the headers a cross-origin request may send (a JSON list)",
    ),
    Flag(
        names=("--enable-ssl-refresh",),
        group=_TRANSPORT,
        default=False,
        boolean=True,
        help="reload the HTTP certificate and key (and --ssl-ca-certs) when their files change",
    ),
    Flag(
        names=("--ssl-cert-reqs",),
        group=_TRANSPORT,
        default=0,
        type=int,
        help="whether HTTPS clients must present a certificate (Python's ssl.CERT_*: 0 none, 1 optional, "
        "2 required), checked against --ssl-ca-certs",
    ),
    Flag(
        names=("--ssl-ciphers",),
        group=_TRANSPORT,
        help="the ciphers HTTPS offers (an OpenSSL cipher list; default: uvicorn's, TLSv1)",
    ),
    Flag(
        names=("--root-path",),
        group=_TRANSPORT,
        help="the path prefix a proxy in front serves this server under: routes answer with and without it, "
        "and the OpenAPI document names it as the server's URL",
    ),
    Flag(
        names=("--middleware",),
        group=_TRANSPORT,
        default=[],
        append=True,
        metavar="MODULE.NAME",
        help="an ASGI middleware class or an HTTP middleware function (`async def f(request, call_next)`) "
        "added to the app, imported by its dotted name; may be given several times",
    ),
    Flag(
        names=("--disable-fastapi-docs",),
        group=_TRANSPORT,
        default=False,
        boolean=True,
        help="serve no /docs, /redoc or /openapi.json",
    ),
    Flag(
        names=("--h11-max-incomplete-event-size",),
        group=_TRANSPORT,
        default=4 * 1024 * 1024,
        type=int,
        help="the most bytes of an incomplete HTTP event (headers) h11 buffers; uvicorn parses with "
        "httptools where it is installed, and then this does nothing (as under vLLM)",
    ),
    Flag(
        names=("--h11-max-header-count",),
        group=_TRANSPORT,
        default=256,
        type=int,
        help="kept on uvicorn's config as vLLM keeps it; uvicorn reads no such setting, so it limits "
        "nothing (as under vLLM 0.32)",
    ),
    Flag(
        names=("--enable-offline-docs",),
        group=_TRANSPORT,
        default=False,
        boolean=True,
        help="/docs with the Swagger UI assets vLLM ships, for air-gapped hosts (no /redoc); needs vLLM "
        "installed (a worker's environment)",
    ),
    # ---- request handling: chat templates ------------------------------------------------------------
    Flag(
        names=("--trust-request-chat-template",),
        group=_CHAT,
        default=False,
        boolean=True,
        help="render a request's own `chat_template` (or `chat_template_kwargs.chat_template`); without it "
        "such a chat, tokenize, Responses or Anthropic request is refused (400), as vLLM's",
    ),
    Flag(
        names=("--default-chat-template-kwargs",),
        group=_CHAT,
        type=_json_object,
        metavar="JSON",
        help='variables every chat template gets (a JSON object, e.g. `{"enable_thinking": false}`), '
        "under each request's `chat_template_kwargs`: a request's value wins unless it is null or \"auto\"",
    ),
    Flag(
        names=("--exclude-tools-when-tool-choice-none",),
        group=_CHAT,
        default=False,
        boolean=True,
        help='a chat, Responses or Anthropic request with `tool_choice` "none" renders without its tools '
        "(the template gets none); /tokenize, which has no tool_choice, keeps them",
    ),
    Flag(
        names=("--anthropic-disabled-thinking-effort",),
        group=_CHAT,
        default="auto",
        choices=("auto", "none", "low", "medium", "high", "xhigh", "max"),
        help='the reasoning_effort an Anthropic request with thinking {"type": "disabled"} renders with '
        '(/v1/messages and count_tokens); auto: "none", unless the chat template refuses it or renders it '
        'as some thinking effort, then "low" (probed once, as vLLM\'s)',
    ),
    # ---- request handling: logging and tokenizer info ------------------------------------------------
    Flag(
        names=("--enable-tokenizer-info-endpoint",),
        group=_LOGGING,
        default=False,
        boolean=True,
        help="serve GET /tokenizer_info: the tokenizer's configuration as vLLM reports it (its "
        "tokenizer_config.json as transformers loads it, and --chat-template), which may expose the chat "
        "template; needs transformers (a worker's environment) and the tokenizer's directory",
    ),
    Flag(
        names=("--enable-log-outputs",),
        group=_LOGGING,
        default=False,
        boolean=True,
        help="with --enable-log-requests (required): log each response's output too, its text and finish "
        "reason at INFO, its token ids at DEBUG (chat completions, messages, responses, and "
        "/inference/v1/generate's token ids), at most --max-log-len characters or ids",
    ),
    Flag(
        names=("--enable-log-deltas",),
        group=_LOGGING,
        default=True,
        boolean=True,
        help="with --enable-log-outputs: log each streamed chat delta as well as the stream's whole text",
    ),
    Flag(
        names=("--log-error-stack",),
        group=_LOGGING,
        # vLLM's default: its VLLM_SERVER_DEV_MODE environment variable (read as --dev-mode reads it).
        default=os.environ.get("VLLM_SERVER_DEV_MODE", "").strip().lower() not in ("", "0", "false", "no"),
        boolean=True,
        help="log the stack trace of each error response the app's error handlers make, with the "
        "request's id (default: the VLLM_SERVER_DEV_MODE environment variable, as vLLM's)",
    ),
    # ---- responses ----------------------------------------------------------------------------------------
    Flag(
        names=("--fingerprint-mode",),
        group=_RESPONSES,
        default="full",
        choices=("full", "hash", "custom", "none"),
        help="the system_fingerprint of chat and completion responses (a stream's: on each choice's last "
        "chunk, or the usage chunk): full `vllm-VERSION[-tpN][-ppN][-dpN][-ep]-HASH8` of the engine's vLLM "
        "and config (a router: its worker's; the mock: null), hash `vllm-VERSION-HASH8`, custom "
        "--fingerprint-value, none null",
    ),
    Flag(
        names=("--fingerprint-value",),
        group=_RESPONSES,
        help="the system_fingerprint of --fingerprint-mode custom",
    ),
    Flag(
        names=("--enable-prompt-tokens-details",),
        group=_RESPONSES,
        default=False,
        boolean=True,
        help="usage carries prompt_tokens_details, as vLLM's: chat completions the prompt's cached_tokens, "
        "created_cache_tokens (computed and written to the prefix cache) and multimodal_tokens (per "
        "modality); completions and /inference/v1/generate its cached_tokens; an Anthropic message "
        "cache_read_input_tokens and cache_creation_input_tokens, taken out of input_tokens (a router: "
        "its worker's counts)",
    ),
    # ---- refused: what vLLM runs and this frontend does not --------------------------------------------
    Flag(
        names=("--headless",),
        group=_REFUSED,
        default=False,
        switch=True,
        help="vLLM: engines only, no API server (multi-node data parallel)",
        refused="a worker always serves HTTP and gRPC over its engine; vLLM's headless engines of a "
        "multi-node data-parallel deployment are not run by this frontend",
    ),
    Flag(
        names=("--api-server-count", "-asc"),
        group=_REFUSED,
        type=int,
        help="vLLM: how many API server processes share the engine (1 here)",
        allowed=(1,),
        refused="one frontend process serves each engine; more processes in front of one engine are "
        "routers (--remote) over the worker",
    ),
    Flag(
        names=("--grpc",),
        group=_REFUSED,
        default=False,
        switch=True,
        help="vLLM: its Python gRPC server instead of HTTP",
        refused="this frontend serves HTTP and, on --grpc-port, its own gRPC service (vllm.internal.Llm) "
        "beside it; vLLM's SMG gRPC server is not run",
    ),
    Flag(
        names=("--tool-parser-plugin",),
        group=_REFUSED,
        default="",
        help="vLLM: a file of tool parsers to register",
        refused="tool parsers run in the chat layer, chosen from its own table by --tool-call-parser; "
        "vLLM's parser plugins are not loaded",
    ),
    Flag(
        names=("--tool-server",),
        group=_REFUSED,
        help="vLLM: tool servers for the Responses API's built-in tools",
        refused="the Responses API's built-in tools (tool servers, MCP) are not served",
    ),
    Flag(
        names=("--enable-per-request-metrics",),
        group=_REFUSED,
        default=False,
        boolean=True,
        help="vLLM: per-request timing metrics in API responses",
        refused="per-request timing metrics in responses are not served (the engine's timings are on "
        "/metrics)",
    ),
    Flag(
        names=("--cohere-is-reasoning-model",),
        group=_REFUSED,
        default=True,
        boolean=True,
        help="vLLM: the Cohere API's reasoning default",
        refused=_COHERE,
    ),
    Flag(
        names=("--cohere-format",),
        group=_REFUSED,
        default="cmd4",
        help="vLLM: the Cohere API's prompt format",
        refused=_COHERE,
    ),
    Flag(
        names=("--tokens-only",),
        group=_REFUSED,
        default=False,
        boolean=True,
        help="vLLM: only the token-in/token-out endpoints",
        refused=_SCALE_OUT,
    ),
    Flag(
        names=("--enable-scale-out",),
        group=_REFUSED,
        default=False,
        boolean=True,
        help="vLLM: the scale-out endpoints beside the OpenAI API",
        refused=_SCALE_OUT,
    ),
    Flag(
        names=("--data-parallel-supervisor-port",),
        group=_REFUSED,
        default=9256,
        type=int,
        help="vLLM: the data-parallel supervisor's port",
        refused=_DP_SUPERVISOR,
    ),
    Flag(
        names=("--dp-supervisor-probe-interval-s",),
        group=_REFUSED,
        default=5.0,
        type=float,
        help="vLLM: how often the supervisor probes its API servers",
        refused=_DP_SUPERVISOR,
    ),
    Flag(
        names=("--dp-supervisor-probe-timeout-s",),
        group=_REFUSED,
        default=5.0,
        type=float,
        help="vLLM: the supervisor's probe deadline",
        refused=_DP_SUPERVISOR,
    ),
    Flag(
        names=("--dp-supervisor-probe-failure-threshold",),
        group=_REFUSED,
        default=3,
        type=int,
        help="vLLM: failed probes before the supervisor restarts an API server",
        refused=_DP_SUPERVISOR,
    ),
    Flag(
        names=("--enable-flash-late-interaction",),
        group=_REFUSED,
        default=True,
        boolean=True,
        help="vLLM: a kernel of late-interaction pooling models",
        refused=_POOLING,
    ),
)


def add_flags(parser: argparse.ArgumentParser, flags: Sequence[Flag] = FLAGS) -> None:
    """Add `flags` to `parser`, one argument group per `Flag.group`."""
    groups: dict[str, Any] = {}
    for flag in flags:
        group = groups.get(flag.group)
        if group is None:
            group = groups[flag.group] = parser.add_argument_group(flag.group)
        kwargs: dict[str, Any] = {"default": flag.default, "help": f"{flag.help} [{_WHERE_TEXT[flag.where]}]"}
        if flag.boolean:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif flag.switch:
            kwargs["action"] = "store_true"
        else:
            kwargs["action"] = "append" if flag.append else "store"
            if flag.type is not None:
                kwargs["type"] = flag.type
            if flag.choices is not None:
                kwargs["choices"] = flag.choices
            if flag.metavar is not None:
                kwargs["metavar"] = flag.metavar
        if flag.append:
            kwargs["default"] = None  # argparse appends to a list default in place: copied in `values`
        group.add_argument(*flag.names, **kwargs)


def value(args: argparse.Namespace, flag_name: str) -> Any:
    """The parsed value of a table flag (an appended flag's default list, copied, when not given)."""
    flag = _BY_NAME[flag_name]
    got = getattr(args, flag.dest)
    if flag.append and got is None:
        return list(flag.default)
    return got


def refuse(args: argparse.Namespace, *, worker: bool) -> None:
    """SystemExit (exit code 1) for a flag given away from its default where it does not apply, or a
    value this frontend does not run (`Flag.refused`), in the words of the engine flags' refusals."""
    for flag in FLAGS:
        given = value(args, flag.name)
        if flag.refused is not None and given != flag.default and given not in flag.allowed:
            why = flag.refused
            raise SystemExit(f"Error: {flag.name} {given!r} is not supported by this frontend: {why}")
        if flag.where == "all" or (flag.where == "worker") == worker:
            continue
        if given != flag.default:
            place = "a worker (--model)" if flag.where == "worker" else "a router (--remote) and the mock"
            raise SystemExit(f"Error: {flag.name} applies to {place} only")


def markdown(flags: Sequence[Flag] = FLAGS) -> str:
    """The table as the Markdown of docs/frontend-flags.md."""
    lines = [
        "# vLLM's frontend flags",
        "",
        "Generated from `vllm_server.frontend_flags.FLAGS` by `python -m vllm_server.frontend_flags`; "
        "do not edit. Each flag has vLLM 0.32's name, type and default (`vllm serve`).",
        "",
    ]
    for group in dict.fromkeys(f.group for f in flags):
        heading = f"## {group[0].upper()}{group[1:]}"
        lines += [heading, "", "| flag | default | where | what |", "|---|---|---|---|"]
        for flag in (f for f in flags if f.group == group):
            names = ", ".join(f"`{n}`" for n in flag.names)
            if flag.boolean:
                names += f", `--no-{flag.name.removeprefix('--')}`"
            text = flag.help if flag.refused is None else f"{flag.help}. Refused: {flag.refused}"
            choices = f" (one of {', '.join(map(str, flag.choices))})" if flag.choices else ""
            default = f"`{json.dumps(flag.default)}`" if flag.default is not None else ""
            text = text.replace("|", "\\|")
            lines.append(f"| {names} | {default} | {_WHERE_TEXT[flag.where]} | {text}{choices} |")
        lines.append("")
    return "\n".join(lines)


_BY_NAME = {flag.name: flag for flag in FLAGS}


if __name__ == "__main__":
    print(markdown(), end="")
