"""`wire-codegen compat --history` (`make compat`) over throwaway git repositories built in tmp_path."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.codegen_cli import COMPAT_FIXTURES, Cli

# Req {a, b optional, c defaulted}, a named struct; Pos positional; revision 1.
BASE = (COMPAT_FIXTURES / "FIELD_NO_DELETE" / "base.yaml").read_text()
B_FIELD = "      - {name: b, type: str, optional: true}\n"
C_FIELD = "      - {name: c, type: int, default: 0}\n"


def _spec(revision: int, *, added: tuple[str, ...] = (), drop_b: bool = False, breaking: str = "") -> str:
    """The base spec at `revision`, with optional fields appended to Req and maybe Req.b removed."""
    text = BASE.replace("revision: 1", f"revision: {revision}")
    extra = "".join(f"      - {{name: {name}, type: float, optional: true}}\n" for name in added)
    text = text.replace(C_FIELD, C_FIELD + extra)
    if drop_b:
        text = text.replace(B_FIELD, "")
    return text + (f"breaking:\n{breaking}" if breaking else "")


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    )
    return proc.stdout.strip()


def _init(repo: Path) -> Path:
    (repo / "spec").mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    return repo


def _commit(repo: Path, message: str, spec: str | None = None) -> str:
    """Commit `spec` as spec/llm.yaml (or a change elsewhere when None); the commit's full hash."""
    if spec is None:
        (repo / "notes").write_text(message)
    else:
        (repo / "spec" / "llm.yaml").write_text(spec)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD")


def _history(cli: Cli, repo: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list[str], str]:
    monkeypatch.chdir(repo)
    result = cli("compat", "--history")
    return result.code, result.out.splitlines(), result.err


def _lines_of(lines: list[str], sha: str) -> list[str]:
    """The step lines of commit `sha` (its short hash begins each)."""
    return [line for line in lines if line.split(" ")[0] and sha.startswith(line.split(" ")[0])]


def _line_of(lines: list[str], sha: str) -> str:
    """The one step line of commit `sha`."""
    (line,) = _lines_of(lines, sha)
    return line


def test_clean_history_lists_every_step(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _init(tmp_path / "repo")
    _commit(repo, "unrelated first", None)
    first = _commit(repo, "spec r1", _spec(1))
    _commit(repo, "unrelated", None)
    second = _commit(repo, "spec r2", _spec(2, added=("d",)))
    third = _commit(repo, "spec r3", _spec(3, added=("d", "e")))
    _commit(repo, "unrelated last", None)
    code, lines, err = _history(cli, repo, monkeypatch)
    assert code == 0, lines
    assert err == ""
    assert "creates the spec, nothing to compare" in _line_of(lines, first)
    assert _line_of(lines, second).endswith("revision 1 -> 2: OK")
    assert _line_of(lines, third).endswith("revision 2 -> 3: OK")
    assert lines[:3] == [_line_of(lines, c) for c in (first, second, third)]  # oldest first
    assert lines[-1].endswith("3 step(s), 2 checked, 0 breaking, 0 not checkable: compatible")


def test_break_in_an_earlier_commit_fails_and_names_it(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _init(tmp_path / "repo")
    _commit(repo, "spec r1", _spec(1))
    broken = _commit(repo, "spec r2 drops Req.b", _spec(2, drop_b=True))
    last = _commit(repo, "spec r3", _spec(3, added=("d",), drop_b=True))
    _commit(repo, "unrelated", None)
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 100, lines
    line = _line_of(lines, broken)
    assert line.endswith("revision 1 -> 2: BREAKING (1 error(s))")
    finding = lines[lines.index(line) + 1].split()
    assert finding[:3] == ["error", "FIELD_NO_DELETE", "Req.b:"]
    assert _line_of(lines, last).endswith("revision 2 -> 3: OK")  # the last step alone would pass
    assert "1 breaking" in lines[-1]


def test_break_declared_for_its_revision_passes(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    declared = "  - {revision: 2, rule: FIELD_NO_DELETE, path: Req.b, reason: unused}\n"
    repo = _init(tmp_path / "repo")
    _commit(repo, "spec r1", _spec(1))
    broken = _commit(repo, "spec r2 drops Req.b", _spec(2, drop_b=True, breaking=declared))
    _commit(repo, "spec r3", _spec(3, added=("d",), drop_b=True, breaking=declared))
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 0, lines
    assert _line_of(lines, broken).endswith("revision 1 -> 2: OK (1 declared break(s))")


def test_shallow_clone_is_not_comparable(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    origin = _init(tmp_path / "origin")
    _commit(origin, "spec r1", _spec(1))
    second = _commit(origin, "spec r2", _spec(2, added=("d",)))
    third = _commit(origin, "spec r3", _spec(3, added=("d", "e")))
    url = origin.resolve().as_uri()
    _git(tmp_path, "clone", "-q", "--depth", "1", url, "depth1")
    code, lines, err = _history(cli, tmp_path / "depth1", monkeypatch)
    assert code == 3, lines
    assert _line_of(lines, third).endswith("revision 3: NOT CHECKED, its parent is not in this clone")
    assert f"cannot check {_line_of(lines, third).split()[0]}:" in err
    assert "git fetch --unshallow" in err
    assert lines[-1].endswith("1 not checkable: INCOMPLETE")
    # Deeper, the visible step is checked and the cut still fails the run.
    _git(tmp_path, "clone", "-q", "--depth", "2", url, "depth2")
    code, lines, err = _history(cli, tmp_path / "depth2", monkeypatch)
    assert code == 3, lines
    assert "NOT CHECKED" in _line_of(lines, second)
    assert _line_of(lines, third).endswith("revision 2 -> 3: OK")
    assert f"cannot check {_line_of(lines, second).split()[0]}:" in err


def test_uncommitted_spec_is_checked_against_head(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _init(tmp_path / "repo")
    _commit(repo, "spec r1", _spec(1))
    _commit(repo, "spec r2", _spec(2, added=("d",)))
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 0
    assert not any(line.startswith("working tree") for line in lines)
    spec = repo / "spec" / "llm.yaml"
    spec.write_text(_spec(3, added=("d",), drop_b=True))
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 100, lines
    assert lines[-3] == "working tree revision 2 -> 3: BREAKING (1 error(s))"
    assert lines[-2].split()[:3] == ["error", "FIELD_NO_DELETE", "Req.b:"]
    spec.write_text(_spec(3, added=("d", "e")))
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 0, lines
    assert lines[-2] == "working tree revision 2 -> 3: OK"


def test_merge_is_checked_against_each_parent(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _init(tmp_path / "repo")
    _commit(repo, "spec r1", _spec(1))
    _git(tmp_path, "clone", "-q", str(repo), "other")  # the side branch, without switching branches
    side = _commit(tmp_path / "other", "side: spec r2 adds e", _spec(2, added=("e",)))
    main = _commit(repo, "main: spec r2 adds d", _spec(2, added=("d",)))
    # Both sides say revision 2 with different wires: the merge must be a revision of its own.
    _git(repo, "fetch", "-q", str(tmp_path / "other"), "main")
    _git(repo, "merge", "-q", "--no-commit", "-s", "ours", "FETCH_HEAD")
    merge = _commit(repo, "merge", _spec(2, added=("d", "e")))
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 100, lines
    assert _line_of(lines, side).endswith("revision 1 -> 2: OK")
    assert _line_of(lines, main).endswith("revision 1 -> 2: OK")
    merge_lines = _lines_of(lines, merge)
    parents = [_line_of(lines, sha).split()[0] for sha in (main, side)]
    assert [line.split()[2] for line in merge_lines] == parents
    assert all("BREAKING" in line for line in merge_lines)
    assert "REVISION_BUMP" in "\n".join(lines)
    (repo / "spec" / "llm.yaml").write_text(_spec(3, added=("d", "e")))
    _git(repo, "commit", "-qa", "--amend", "--no-edit")  # the merge, now revision 3
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 0, lines
    assert len([line for line in lines if "against" in line and line.endswith("2 -> 3: OK")]) == 2


def test_spec_created_later_and_removed(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _init(tmp_path / "repo")
    _commit(repo, "no spec yet", None)
    (repo / "spec" / "llm.yaml").write_text(_spec(1))
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 0
    assert lines[0] == "working tree revision 1: creates the spec, nothing to compare"
    created = _commit(repo, "spec r1", _spec(1))
    (repo / "spec" / "llm.yaml").unlink()
    _git(repo, "commit", "-qam", "drop the spec")
    removed = _git(repo, "rev-parse", "HEAD")
    _commit(repo, "spec again", _spec(2))
    code, lines, _ = _history(cli, repo, monkeypatch)
    assert code == 100, lines
    assert "creates the spec" in _line_of(lines, created)
    assert _line_of(lines, removed).endswith("revision 1 -> none: BREAKING, the spec was removed")


def test_outside_a_checkout_is_a_usage_error(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "llm.yaml").write_text(_spec(1))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    result = cli("compat", "--history")
    assert result.code == 2
    assert "needs a git checkout" in result.err
