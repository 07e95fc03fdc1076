"""The git plumbing `compat` needs: a file at a commit, the commits that changed it, where a clone is cut.

Each question is one `git` process (`git log`, `git cat-file`, `git rev-parse`) run at the top of the
checkout; answers are plain strings and tuples, so nothing above this module speaks git.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


class GitError(Exception):
    """A question git cannot answer here: no checkout, or an unknown revision."""


@dataclass(frozen=True)
class Commit:
    """One commit: its full and short hashes and those of its parents (none for a root or a cut)."""

    sha: str
    short: str
    parents: tuple[str, ...]
    short_parents: tuple[str, ...]


@dataclass(frozen=True)
class Repo:
    """A git checkout, by its top directory."""

    top: Path

    @classmethod
    def containing(cls, path: Path) -> Repo:
        """The checkout that holds `path` (a file or a directory); GitError outside one."""
        directory = path if path.is_dir() else path.parent
        top = _git(["rev-parse", "--show-toplevel"], directory.resolve())
        if top is None:
            raise GitError(f"{path} is not in a git checkout")
        return cls(Path(top.strip()).resolve())

    def relative(self, path: Path) -> str:
        """`path` relative to the top, as git names it."""
        return path.resolve().relative_to(self.top).as_posix()

    def commit(self, rev: str) -> str | None:
        """The full hash of the commit `rev` names, None if there is none (an empty repository's HEAD)."""
        out = self._run("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        return out.strip() if out is not None else None

    def has_commit(self, sha: str) -> bool:
        """Whether the commit's object is in this clone."""
        return self._run("cat-file", "-e", f"{sha}^{{commit}}") is not None

    def file_at(self, rev: str, rel: str) -> str | None:
        """The text of `rel` at commit `rev`, None if the file does not exist there."""
        return self._run("cat-file", "blob", f"{rev}:{rel}")

    def changes(self, rel: str) -> list[Commit]:
        """The commits reachable from HEAD that changed `rel`, oldest first (none without a HEAD)."""
        if self.commit("HEAD") is None:
            return []
        out = self._run(
            "log", "--reverse", "--no-show-signature", "--format=%H%x00%h%x00%P%x00%p", "HEAD", "--", rel
        )
        if out is None:
            raise GitError(f"`git log -- {rel}` failed in {self.top}")
        commits = []
        for line in out.splitlines():
            sha, short, parents, short_parents = line.split("\0")
            commits.append(Commit(sha, short, tuple(parents.split()), tuple(short_parents.split())))
        return commits

    def shallow_boundary(self) -> frozenset[str]:
        """The commits whose parents this clone cut off (`.git/shallow`); empty in a whole clone."""
        out = self._run("rev-parse", "--path-format=absolute", "--git-path", "shallow")
        if out is None:
            return frozenset()
        shallow = Path(out.strip())
        return frozenset(shallow.read_text().split()) if shallow.exists() else frozenset()

    def _run(self, *args: str) -> str | None:
        return _git(list(args), self.top)


def _git(args: list[str], cwd: Path) -> str | None:
    """Git's stdout, None when it exits non-zero."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8", check=False
    )
    return proc.stdout if proc.returncode == 0 else None
