"""Every compat rule through the CLI: one breaking and one compatible example each (tests/compat/<RULE>)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.codegen_cli import COMPAT_FIXTURES, Cli
from wire_codegen.rules import RULES

EXPECTED_PATH = {
    "STRUCT_NO_DELETE": "Extra",
    "STRUCT_SAME_LAYOUT": "Extra",
    "FIELD_ADD_OPTIONAL": "Pos.w",
    "FIELD_ADD_REQUIRED": "Req.d",
    "FIELD_NO_DELETE": "Req.b",
    "FIELD_SAME_NAME": "Req.b",
    "FIELD_SAME_POSITION": "Pos.x",
    "FIELD_SAME_TYPE": "Req.a",
    "FIELD_SAME_DEFAULT": "Req.c",
    "ENUM_NO_DELETE": "Shade",
    "ENUM_VALUE_ADD": "Color.blue",
    "ENUM_VALUE_NO_DELETE": "Color.green",
    "ENUM_VALUE_SAME_VALUE": "Color.green",
    "RPC_NO_DELETE": "test.Svc/Stream",
    "RPC_SAME_REQUEST_TYPE": "test.Svc/Do",
    "RPC_SAME_RESPONSE_TYPE": "test.Svc/Do",
    "RPC_SAME_STREAMING": "test.Svc/Do",
    "SERVICE_SAME_NAME": "test.Svc",
    "REVISION_BUMP": "revision",
}


def test_every_breaking_rule_has_a_fixture() -> None:
    breaking_rules = {r.id for r in RULES if "error" in (r.named, r.positional)}
    assert breaking_rules == set(EXPECTED_PATH)
    assert {p.name for p in COMPAT_FIXTURES.iterdir() if p.is_dir()} == breaking_rules


@pytest.mark.parametrize("rule", sorted(EXPECTED_PATH))
def test_breaking_example_fails(cli: Cli, rule: str) -> None:
    d = COMPAT_FIXTURES / rule
    result = cli("compat", "--base", str(d / "base.yaml"), "--spec", str(d / "new.yaml"), "--format", "json")
    assert result.code == 100, result.out
    findings = result.json()
    assert all(set(f) == {"rule", "severity", "path", "message"} for f in findings)
    assert {"rule": rule, "severity": "error", "path": EXPECTED_PATH[rule]} in [
        {k: f[k] for k in ("rule", "severity", "path")} for f in findings
    ]


@pytest.mark.parametrize("rule", sorted(EXPECTED_PATH))
def test_compatible_example_passes(cli: Cli, rule: str) -> None:
    d = COMPAT_FIXTURES / rule
    result = cli("compat", "--base", str(d / "base.yaml"), "--spec", str(d / "ok.yaml"), "--format", "json")
    assert result.code == 0, result.out
    assert [f for f in result.json() if f["severity"] == "error"] == []


def test_appending_optional_field_to_named_struct_passes_with_info(cli: Cli) -> None:
    d = COMPAT_FIXTURES / "REVISION_BUMP"
    result = cli("compat", "--base", str(d / "base.yaml"), "--spec", str(d / "ok.yaml"), "--format", "json")
    assert result.code == 0
    assert [(f["rule"], f["severity"], f["path"]) for f in result.json()] == [
        ("FIELD_ADD_OPTIONAL", "info", "Req.d")
    ]


def test_appending_any_field_to_positional_struct_fails(cli: Cli, tmp_path: Path) -> None:
    base = (COMPAT_FIXTURES / "FIELD_ADD_OPTIONAL" / "base.yaml").read_text()
    for field in ("{name: w, type: int, default: 3}", "{name: w, type: int, optional: true}"):
        new = base.replace("revision: 1", "revision: 2").replace(
            "      - {name: z, type: bool, default: false}\n",
            f"      - {{name: z, type: bool, default: false}}\n      - {field}\n",
        )
        (tmp_path / "new.yaml").write_text(new)
        result = cli(
            "compat",
            "--base",
            str(COMPAT_FIXTURES / "FIELD_ADD_OPTIONAL" / "base.yaml"),
            "--spec",
            str(tmp_path / "new.yaml"),
            "--format",
            "json",
        )
        assert result.code == 100
        errors = [(f["rule"], f["path"]) for f in result.json() if f["severity"] == "error"]
        assert errors == [("FIELD_ADD_OPTIONAL", "Pos.w")], field


def test_declared_break_passes_only_in_its_revision(cli: Cli, tmp_path: Path) -> None:
    d = COMPAT_FIXTURES / "FIELD_NO_DELETE"
    breaking = (d / "new.yaml").read_text()
    for revision, expected in ((2, 0), (1, 100)):
        declared = breaking + (
            f"breaking:\n  - {{revision: {revision}, rule: FIELD_NO_DELETE, path: Req.b, reason: unused}}\n"
        )
        (tmp_path / "new.yaml").write_text(declared)
        result = cli(
            "compat", "--base", str(d / "base.yaml"), "--spec", str(tmp_path / "new.yaml"), "--format", "json"
        )
        assert result.code == expected, result.out
        severities = {f["severity"] for f in result.json() if f["rule"] == "FIELD_NO_DELETE"}
        assert severities == ({"accepted"} if expected == 0 else {"error"})


def test_text_and_github_formats(cli: Cli) -> None:
    d = COMPAT_FIXTURES / "FIELD_SAME_TYPE"
    text = cli("compat", "--base", str(d / "base.yaml"), "--spec", str(d / "new.yaml"))
    assert text.code == 100
    assert "FIELD_SAME_TYPE" in text.out
    assert "BREAKING" in text.out
    github = cli(
        "compat", "--base", str(d / "base.yaml"), "--spec", str(d / "new.yaml"), "--format", "github"
    )
    assert github.code == 100
    assert any(
        line.startswith("::error file=") and "title=FIELD_SAME_TYPE::" in line
        for line in github.out.splitlines()
    )


def test_verify_reports_what_fails_under_msgspec(cli: Cli) -> None:
    d = COMPAT_FIXTURES / "ENUM_VALUE_ADD"
    result = cli(
        "compat",
        "--base",
        str(d / "base.yaml"),
        "--spec",
        str(d / "new.yaml"),
        "--format",
        "json",
        "--verify",
    )
    assert result.code == 100
    verify = [f for f in result.json() if f["rule"] == "VERIFY_DECODE"]
    assert [f["path"] for f in verify] == ["Color"]
    assert "new → old" in verify[0]["message"]
    # A required field added to a named struct: old writers' messages no longer decode.
    d = COMPAT_FIXTURES / "FIELD_ADD_REQUIRED"
    result = cli(
        "compat",
        "--base",
        str(d / "base.yaml"),
        "--spec",
        str(d / "new.yaml"),
        "--format",
        "json",
        "--verify",
    )
    verify = [f for f in result.json() if f["rule"] == "VERIFY_DECODE"]
    assert [(f["path"], f["message"].split(":")[0]) for f in verify] == [("Req", "old → new")]
    # An optional field added to a named struct cross-decodes both ways.
    d = COMPAT_FIXTURES / "REVISION_BUMP"
    result = cli(
        "compat", "--base", str(d / "base.yaml"), "--spec", str(d / "ok.yaml"), "--format", "json", "--verify"
    )
    assert result.code == 0
    assert [f for f in result.json() if f["rule"] == "VERIFY_DECODE"] == []


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True, capture_output=True
    )


def test_against_git_revision(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "repo"
    (repo / "spec").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "README").write_text("x")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "no spec yet")
    d = COMPAT_FIXTURES / "FIELD_NO_DELETE"
    shutil.copy(d / "base.yaml", repo / "spec" / "llm.yaml")
    monkeypatch.chdir(repo)
    # No spec at the base revision: a note, exit 0.
    result = cli("compat", "--against", "HEAD")
    assert result.code == 0
    assert "does not exist" in result.err
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "spec")
    shutil.copy(d / "new.yaml", repo / "spec" / "llm.yaml")
    result = cli("compat", "--against", "HEAD", "--format", "json")
    assert result.code == 100
    assert "FIELD_NO_DELETE" in {f["rule"] for f in result.json()}
    shutil.copy(d / "ok.yaml", repo / "spec" / "llm.yaml")
    assert cli("compat", "--against", "HEAD").code == 0
    bad = cli("compat", "--against", "no-such-rev")
    assert bad.code == 2
    assert "unknown git revision" in bad.err


def test_console_script_exit_codes() -> None:
    d = COMPAT_FIXTURES / "ENUM_VALUE_ADD"
    cmd = [sys.executable, "-m", "wire_codegen", "compat", "--base", str(d / "base.yaml")]
    assert subprocess.run([*cmd, "--spec", str(d / "new.yaml")], capture_output=True).returncode == 100
    assert subprocess.run([*cmd, "--spec", str(d / "ok.yaml")], capture_output=True).returncode == 0
    usage = subprocess.run([sys.executable, "-m", "wire_codegen", "compat"], capture_output=True, text=True)
    assert usage.returncode == 2
    assert "--base" in usage.stderr
