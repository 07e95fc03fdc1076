"""Fixtures of the code generator's tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.codegen_cli import ROOT, Cli, cli_runner
from wire_codegen.loader import load_spec
from wire_codegen.protos import render_protos
from wire_codegen.render import Output, render


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """Run `wire-codegen ARGS...` in process and capture what it prints."""
    return cli_runner(capsys)


@pytest.fixture(scope="session")
def generated() -> list[Output]:
    """Everything `wire-codegen gen` produces from the checked-in spec/ (wire files, then protobuf)."""
    spec = load_spec(ROOT / "spec" / "llm.yaml", display_path="spec/llm.yaml")
    return [*render(spec, spec_name="spec/llm.yaml", root=ROOT), *render_protos(ROOT)]


@pytest.fixture
def tree(tmp_path: Path, generated: list[Output]) -> Path:
    """A copy of spec/, the ruff settings and every checked-in generated file, to break at will."""
    shutil.copytree(ROOT / "spec", tmp_path / "spec")
    for rel in ["pyproject.toml", *(o.path for o in generated)]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path
