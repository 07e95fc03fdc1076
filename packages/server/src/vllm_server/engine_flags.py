"""A worker's engine flags: vLLM's own engine argument parser, not a copy of it.

`vllm-frontend serve --model M` takes every flag of vLLM's engine argument parser
(`AsyncEngineArgs.add_cli_args`), parsed by vLLM's own `FlexibleArgumentParser` (underscores or dashes,
`--config FILE`, dotted JSON keys such as `--compilation-config.mode 0`), and hands the values to the
engine exactly as `vllm serve` does (`AsyncEngineArgs.from_cli_args`, then `create_engine_config` in
the OpenAI server's usage context: `EngineCoreSettings.engine_config`). So a flag means to a worker what
it means to vLLM, and a flag vLLM adds in a later version arrives with it.

vLLM is installed wherever a worker runs, and only there: a router (`--remote`) and the demo (`--mock`)
never import it, and refuse engine flags as unrecognized arguments. The few flags a router needs too
(`--tokenizer`, `--served-model-name`, `--reasoning-parser`, the multimodal ones, ...) are defined by
the CLI for them under vLLM's names and meanings (`vllm_server.cli`).

Some engine flags change what vLLM's *frontend* does, not only its engine. This frontend does what vLLM's
does for most of them (generation-config defaults, prompt embeddings, multimodal limits and media paths,
the stream interval, request logging, tracing). Those whose frontend half it does not have are refused
at start-up (`UNSUPPORTED`), rather than accepted and ignored.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
from collections.abc import Callable
from typing import Any

from vllm_llm import EngineCoreSettings

#: Flags of vLLM's engine parser the CLI defines itself, for every source: `--model` is the CLI's
#: source, `--log-level` the CLI's own (it also reaches vLLM's logging config, see `engine_fields`).
OWN_FLAGS = frozenset({"--model", "--log-level"})


def vllm_installed() -> bool:
    """Whether vLLM can be imported here (a worker's environment)."""
    return importlib.util.find_spec("vllm") is not None


def parser_class() -> type[argparse.ArgumentParser]:
    """vLLM's `FlexibleArgumentParser`, listing every flag on `--help` (vLLM's lists only the groups
    unless asked `--help=all`); `--help=KEYWORD` searches as vLLM's does."""
    from vllm.utils import argparse_utils

    flexible: Any = argparse_utils.FlexibleArgumentParser

    class ServeParser(flexible):  # type: ignore[misc]
        def format_help(self) -> str:
            if flexible._search_keyword is not None:
                return str(super().format_help())
            return argparse.ArgumentParser.format_help(self)

    return ServeParser


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """Add vLLM's engine argument groups to `parser` (a `parser_class()`), but for `OWN_FLAGS`."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils import argparse_utils

    flexible: Any = argparse_utils.FlexibleArgumentParser
    vllm = flexible(add_help=False)
    AsyncEngineArgs.add_cli_args(vllm)
    for group in vllm._action_groups:
        actions = [a for a in group._group_actions if not OWN_FLAGS & set(a.option_strings)]
        if not actions:
            continue
        title = f"vLLM engine: {group.title}" if group.title not in (None, "options") else "vLLM engine"
        into = parser.add_argument_group(title, group.description)
        for action in actions:
            into._add_action(action)
    deprecated = getattr(vllm, "_deprecated", None)
    if deprecated is not None and hasattr(parser, "_deprecated"):
        parser._deprecated |= deprecated  # vLLM warns when a deprecated flag is used


def engine_fields(args: argparse.Namespace) -> dict[str, Any]:
    """Every `AsyncEngineArgs` field the parsed flags give, as `AsyncEngineArgs.from_cli_args` takes
    them (`--model` and `--log-level` from the CLI's own flags)."""
    from vllm.engine.arg_utils import AsyncEngineArgs

    fields = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(AsyncEngineArgs) if hasattr(args, f.name)
    }
    if args.log_level is not None:
        fields["log_level"] = args.log_level.upper()  # vLLM's spelling of the same levels
    else:
        fields.pop("log_level", None)
    return fields


def check_supported(fields: dict[str, Any]) -> None:
    """Refuse (SystemExit, exit code 1) an engine flag whose frontend half this server does not have."""
    for name, (supported, why) in UNSUPPORTED.items():
        if name in fields and not supported(fields[name]):
            flag = "--" + name.replace("_", "-")
            raise SystemExit(f"Error: {flag} {fields[name]!r} is not supported by this frontend: {why}")


def engine_settings(fields: dict[str, Any], *, randomize_request_ids: bool) -> EngineCoreSettings:
    """The EngineCoreLlm settings of these engine fields (checked with `check_supported`)."""
    check_supported(fields)
    return EngineCoreSettings.from_engine_args(fields, randomize_request_ids=randomize_request_ids)


def _one_of(*allowed: Any) -> Callable[[Any], bool]:
    return lambda value: value in allowed


#: Engine flags whose effect on vLLM's frontend this one does not have, with the values it takes.
UNSUPPORTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "tokenizer_mode": (
        _one_of("auto", "hf"),
        "the text layer tokenizes with the model's Hugging Face tokenizer.json (auto or hf)",
    ),
    "skip_tokenizer_init": (
        _one_of(False),
        "the text and chat layers of a worker need its tokenizer (a token-only Llm is served by a "
        "program, over LlmSource.provided)",
    ),
    "reasoning_parser_plugin": (
        _one_of(None, ""),
        "reasoning parsers run in the chat layer, chosen from its own table by --reasoning-parser; "
        "vLLM's parser plugins are not loaded",
    ),
    "io_processor_plugin": (_one_of(None, ""), "pooling models are not served"),
    "watermark_config": (
        _one_of(None),
        "vLLM's frontend resolves each request's watermarking (InputProcessor.apply_watermarking); this "
        "one does not, so no request would be watermarked",
    ),
    "runner": (_one_of("auto", "generate"), "pooling models are not served; generation only"),
    "convert": (_one_of("auto", "none"), "pooling models are not served; generation only"),
}
