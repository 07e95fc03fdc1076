"""Fixtures of the code generator's tests."""

from __future__ import annotations

import pytest

from tests.support.codegen_cli import Cli, cli_runner


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run `wire-codegen ARGS...` in process and capture what it prints."""
    return cli_runner(capsys)
