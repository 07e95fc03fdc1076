"""`--config FILE`: `serve` options from a YAML file, read as `vllm serve` reads it.

vLLM's `FlexibleArgumentParser` turns the file into flags placed before the command line's, so a flag
given on the command line wins over the file and the file over the defaults. Each key is a flag, with
dashes or underscores; `true` gives the switch, `false` its `--no-` form where the flag has one (else
nothing, the default), a list the flag followed by its items (none for an empty list), a mapping the flag
with the mapping as JSON (vLLM's `--compilation-config` and the like), and anything else the flag with the
value as text. Every source reads it alike, a router and the mock as a worker, without importing vLLM.

Where vLLM looks `--no-KEY` up with the key as written (`enable_prefix_caching: false` does nothing
there), the key is read with dashes first: a value the file gives is never dropped without a word.
"""

from __future__ import annotations

import json
from collections.abc import Container, Sequence
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ConfigFileError", "expand", "flags", "load", "split"]


class ConfigFileError(ValueError):
    """A `--config` that cannot be read: the message says which file and why."""


def split(argv: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """The mapping of the file `--config` names in `argv` (`--config FILE` or `--config=FILE`; empty
    without one), and `argv` without it."""
    given = [i for i, arg in enumerate(argv) if arg == "--config" or arg.startswith("--config=")]
    if not given:
        return {}, list(argv)
    if len(given) > 1:
        raise ConfigFileError("--config is given more than once: one config file is read")
    index = given[0]
    if argv[index] != "--config":
        return load(argv[index].removeprefix("--config=")), [*argv[:index], *argv[index + 1 :]]
    if index == len(argv) - 1 or argv[index + 1].startswith("-"):
        raise ConfigFileError("--config names no file: --config FILE.yaml")
    return load(argv[index + 1]), [*argv[:index], *argv[index + 2 :]]


def load(path: str) -> dict[str, Any]:
    """The mapping of a YAML config file (a .yaml or .yml file, as vLLM requires)."""
    extension = path.rsplit(".", 1)[-1]
    if extension not in ("yaml", "yml") or "." not in path:
        raise ConfigFileError(f"--config {path!r}: a config file is a .yaml or .yml file (as vLLM's)")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigFileError(f"--config {path!r} cannot be read: {exc.strerror or exc}") from exc
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"--config {path!r} is not valid YAML: {exc}") from exc
    if config is None:
        return {}
    if not isinstance(config, dict) or not all(isinstance(key, str) for key in config):
        raise ConfigFileError(f"--config {path!r}: the file is a mapping of flag names to values")
    return config


def flags(config: dict[str, Any], options: Container[str]) -> list[str]:
    """The command-line flags of a config mapping; `options` are the parser's option strings (for the
    `--no-` form of a `false`)."""
    args: list[str] = []
    for key, value in config.items():
        name, dot, nested = key.partition(".")  # vLLM's `--a-b.c_d`: dashes before the first dot
        flag = "--" + name.replace("_", "-") + dot + nested
        if isinstance(value, bool):
            if value:
                args.append(flag)
            elif (negated := "--no-" + flag[2:]) in options:
                args.append(negated)
        elif isinstance(value, list):
            if value:
                args += [flag, *(_text(item) for item in value)]
        elif isinstance(value, dict):
            args += [flag, json.dumps(value)]
        elif value is None:
            raise ConfigFileError(f"--config: {key!r} has no value")
        else:
            args += [flag, _text(value)]
    return args


def _text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, dict) else str(value)


def expand(argv: Sequence[str], options: Container[str]) -> list[str]:
    """`argv` with its `--config FILE` replaced by the file's flags, placed first (the command line's
    flags, after them, win)."""
    config, rest = split(argv)
    return [*flags(config, options), *rest]
