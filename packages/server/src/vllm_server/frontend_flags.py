"""vLLM's frontend flags (`vllm serve`'s own, beside its engine flags), in one table.

Each `Flag` holds a flag as vLLM 0.32's parser defines it (`vllm.entrypoints.launchers.cli_args`: its
names, type, default and choices; `tests/server/test_frontend_flags.py` compares them with vLLM's parser)
with this server's help text and where it applies: a worker (`--model`), a router (`--remote`) and the
mock, or all of them. The CLI's parser adds them from here (`add_flags`), refuses one given where it does
not apply (`refuse_misplaced`), and `docs/frontend-flags.md` is this table rendered (`markdown`;
`python -m vllm_server.frontend_flags` writes it).

The CLI's older flags are still defined in `vllm_server.cli`; they move here group by group.
"""

from __future__ import annotations

import argparse
import json
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
    metavar: str | None = None
    where: Where = "all"

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


_TRANSPORT = "start-up and transport (vLLM's flags)"

#: The table. Order: vLLM's, within each group.
FLAGS: tuple[Flag, ...] = (
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


def refuse_misplaced(args: argparse.Namespace, *, worker: bool) -> None:
    """SystemExit (exit code 1) for a flag given away from its default where it does not apply."""
    for flag in FLAGS:
        if flag.where == "all" or (flag.where == "worker") == worker:
            continue
        if value(args, flag.name) != flag.default:
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
            choices = f" (one of {', '.join(map(str, flag.choices))})" if flag.choices else ""
            default = f"`{json.dumps(flag.default)}`" if flag.default is not None else ""
            text = flag.help.replace("|", "\\|")
            lines.append(f"| {names} | {default} | {_WHERE_TEXT[flag.where]} | {text}{choices} |")
        lines.append("")
    return "\n".join(lines)


_BY_NAME = {flag.name: flag for flag in FLAGS}


if __name__ == "__main__":
    print(markdown(), end="")
