"""Running the code generator's CLI in process (`cli` fixture in tests/codegen)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from wire_codegen.cli import main

ROOT = Path(__file__).resolve().parents[2]
COMPAT_FIXTURES = ROOT / "tests" / "compat"


@dataclass
class CliResult:
    """What one CLI run printed and returned."""

    code: int
    out: str
    err: str

    def json(self) -> list[dict[str, Any]]:
        """The stdout as JSON findings."""
        findings: list[dict[str, Any]] = json.loads(self.out)
        return findings


Cli = Callable[..., CliResult]


def cli_runner(capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run `wire-codegen ARGS...` in process and capture what it prints."""

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run
