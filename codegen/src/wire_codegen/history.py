"""The spec's visible history, step by step: every commit that changed it, against its parent.

`wire-codegen compat --history` (what `make compat` runs) walks the commits reachable from HEAD that
changed the spec, oldest first, and judges each against each of its parents (a merge against each
side), then the working tree against HEAD when the two differ. A spec change in an early commit of a
many-commit submission is checked as surely as one in the last. Each step is one of:

- **checked**: both sides load and the linter judges the pair with the rules of `compat --against`
  (the revision goes up by one when the wire changes; a break passes only when the new spec declares
  it under `breaking:` for its own revision). An error fails the run.
- **created**: the parent has no spec (the commit that added the file, a root commit included).
  Nothing to compare, and the step says so; there is no older wire to stay compatible with.
- **removed**: the commit deleted the spec: every struct of the wire is gone, a break.
- **cut**: the parent is not in this clone. A shallow clone (`git clone --depth N`) grafts its oldest
  commit as a root, so git shows the spec as created there although it may have changed. This step
  cannot be checked, and it **fails** the run rather than passing with a warning: a pass would claim a
  check that was not made, the silent pass this walk exists to end (a CI moved to a shallow checkout
  would go green without looking). CI checks a whole `git clone`, where no step is cut, so the failure
  is only met in a clone made shallow on purpose, names the commit, and `git fetch --unshallow` clears
  it; `compat --against REV` still compares one pair in any clone that holds REV.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wire_codegen.compat import Finding, is_breaking
from wire_codegen.git import Commit, Repo
from wire_codegen.loader import SpecError, load_spec_text
from wire_codegen.model import Spec

StepKind = Literal["checked", "created", "removed", "cut"]
Judge = Callable[[Spec, Spec], list[Finding]]
WORKING_TREE = "working tree"


@dataclass(frozen=True)
class Step:
    """One step of the history: a commit (short hash, or the working tree) against one parent."""

    commit: str
    parent: str | None
    kind: StepKind
    base_revision: int | None
    revision: int | None
    findings: tuple[Finding, ...] = ()
    merge: bool = False

    @property
    def breaking(self) -> bool:
        """Whether the step breaks the wire (an error finding, or the spec removed)."""
        return self.kind == "removed" or is_breaking(list(self.findings))


def walk(repo: Repo, spec: Path, judge: Judge) -> list[Step]:
    """Every step from the first visible commit that changed `spec` to the working tree, oldest first."""
    history = _History(repo, repo.relative(spec), judge)
    steps = [step for commit in repo.changes(history.rel) for step in history.commit_steps(commit)]
    steps.extend(history.working_tree_steps(spec))
    return steps


class _History:
    """What the walk shares: the checkout, the spec's path in it, the judge and the specs loaded."""

    def __init__(self, repo: Repo, rel: str, judge: Judge) -> None:
        self.repo = repo
        self.rel = rel
        self.judge = judge
        self.cut = repo.shallow_boundary()
        # By text: a parent's spec is usually the previous changing commit's, loaded once.
        self._loaded: dict[str, Spec] = {}

    def commit_steps(self, commit: Commit) -> Iterator[Step]:
        new = self._spec_at(commit.sha, commit.short)
        if not commit.parents:
            kind: StepKind = "cut" if commit.sha in self.cut else "created"
            yield Step(commit.short, None, kind, None, new.revision if new else None)
            return
        merge = len(commit.parents) > 1
        for parent, short in zip(commit.parents, commit.short_parents, strict=True):
            base = self._spec_at(parent, short)
            if base is None and not self.repo.has_commit(parent):
                # Named as a parent but absent (a clone cut some other way than --depth): as shallow.
                yield Step(commit.short, short, "cut", None, new.revision if new else None, merge=merge)
                continue
            yield self._step(commit.short, short, base, new, merge=merge)

    def working_tree_steps(self, spec: Path) -> Iterator[Step]:
        try:
            text = spec.read_text(encoding="utf-8")
        except OSError as exc:
            raise SpecError(self.rel, 0, f"cannot read the spec: {exc.strerror}") from exc
        head = self.repo.file_at("HEAD", self.rel) if self.repo.commit("HEAD") else None
        if head == text:
            return
        base = self._parse(head, f"HEAD:{self.rel}") if head is not None else None
        yield self._step(WORKING_TREE, "HEAD", base, self._parse(text, self.rel))

    def _step(
        self,
        commit: str,
        parent: str,
        base: Spec | None,
        new: Spec | None,
        *,
        merge: bool = False,
    ) -> Step:
        if new is None:
            return Step(commit, parent, "removed", base.revision if base else None, None, merge=merge)
        if base is None:
            return Step(commit, parent, "created", None, new.revision, merge=merge)
        findings = tuple(self.judge(base, new))
        return Step(commit, parent, "checked", base.revision, new.revision, findings, merge)

    def _spec_at(self, sha: str, short: str) -> Spec | None:
        text = self.repo.file_at(sha, self.rel)
        return self._parse(text, f"{short}:{self.rel}") if text is not None else None

    def _parse(self, text: str, shown: str) -> Spec:
        if text not in self._loaded:
            self._loaded[text] = load_spec_text(text, shown)
        return self._loaded[text]
