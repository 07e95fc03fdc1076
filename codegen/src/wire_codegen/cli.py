"""`wire-codegen`: generate from spec/ (`gen`, `gen --check`) and lint changes (`compat`).

`gen` writes every generated file: from spec/llm.yaml the wire package, the client stub, the compat
rules and docs/wire.md; from spec/proto/ the public gRPC API's protobuf modules.
`compat --history` judges every commit that changed the spec against its parent (`history`).
Exit codes: 0 fine, 1 stale generated files (`gen --check`), 2 usage, spec, git or protoc error,
3 a step of the history that could not be checked (`compat --history` in a shallow clone),
100 breaking changes (`compat`).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from wire_codegen.compat import Finding, is_breaking, lint
from wire_codegen.git import GitError, Repo
from wire_codegen.history import Judge, Step, walk
from wire_codegen.loader import SpecError, load_spec, load_spec_text
from wire_codegen.model import Spec
from wire_codegen.protos import ProtocError, orphans, render_protos
from wire_codegen.render import render

EXIT_OK = 0
EXIT_STALE = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_BREAKING = 100
DEFAULT_SPEC = "spec/llm.yaml"


class UsageError(Exception):
    """A command line or environment problem (exit 2)."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (UsageError, GitError, ProtocError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="wire-codegen", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(required=True, dest="command")

    gen = sub.add_parser("gen", help="write every generated file (or check them with --check)")
    gen.add_argument("--spec", default=DEFAULT_SPEC, help="the spec (default: %(default)s)")
    gen.add_argument("--root", default=".", help="the repository root outputs are relative to")
    gen.add_argument("--check", action="store_true", help="write nothing; fail with a diff if stale")
    gen.set_defaults(func=_cmd_gen)

    compat = sub.add_parser("compat", help="lint the spec against a base revision")
    compat.add_argument("--spec", default=DEFAULT_SPEC, help="the new spec (default: %(default)s)")
    base = compat.add_mutually_exclusive_group(required=True)
    base.add_argument("--base", help="the base spec file")
    base.add_argument("--against", metavar="GIT_REV", help="read the base with `git show REV:<spec>`")
    base.add_argument(
        "--history",
        action="store_true",
        help="every commit that changed the spec against its parent, then the working tree against HEAD",
    )
    compat.add_argument("--format", choices=("text", "json", "github"), default="text")
    compat.add_argument(
        "--verify",
        action="store_true",
        help="also generate both revisions and cross-decode sample values under msgspec",
    )
    compat.set_defaults(func=_cmd_compat)
    return parser


# ---- gen ----------------------------------------------------------------------------------------


def _cmd_gen(args: argparse.Namespace) -> int:
    root = Path(args.root).resolve()
    spec_path = Path(args.spec)
    spec = load_spec(spec_path, display_path=_display(spec_path, root))
    outputs = [*render(spec, spec_name=_display(spec_path, root), root=root), *render_protos(root)]
    # path -> content, None for a generated module whose .proto is gone: stale too, `gen` removes it.
    targets: list[tuple[str, str | None]] = [(o.path, o.content) for o in outputs]
    targets += [(path, None) for path in orphans(root, outputs)]
    stale = 0
    for path, content in targets:
        target = root / path
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == content:
            continue
        if args.check:
            stale += 1
            sys.stdout.writelines(_diff(path, current, content))
        elif content is None:
            target.unlink()
            print(f"removed {path}")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")
            print(f"wrote {path}")
    if stale:
        print(f"\n{stale} generated file(s) are stale: run `make gen`", file=sys.stderr)
        return EXIT_STALE
    return EXIT_OK


def _diff(path: str, current: str | None, content: str | None) -> list[str]:
    """The unified diff from the file on disk to what `gen` would leave (nothing: /dev/null)."""
    return list(
        difflib.unified_diff(
            (current or "").splitlines(keepends=True),
            (content or "").splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path} (generated)" if content is not None else "/dev/null",
        )
    )


def _display(path: Path, root: Path) -> str:
    try:
        return path.resolve().relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


# ---- compat -------------------------------------------------------------------------------------


def _cmd_compat(args: argparse.Namespace) -> int:
    if args.history:
        return _cmd_history(args)
    new = load_spec(args.spec)
    if args.base is not None:
        base = load_spec(args.base)
    else:
        text = _git_show(args.against, Path(args.spec))
        if text is None:
            print(
                f"note: {args.spec} does not exist at {args.against}; nothing to compare",
                file=sys.stderr,
            )
            return EXIT_OK
        base = load_spec_text(text, f"{args.against}:{args.spec}")
    findings = _judge(args.verify)(base, new)
    _report(findings, args.format, base, new)
    return EXIT_BREAKING if is_breaking(findings) else EXIT_OK


def _judge(verify: bool) -> Judge:
    """The linter, followed by the msgspec cross-decoding check with --verify."""
    if not verify:
        return lint
    from wire_codegen.verify import verify as cross_decode

    return lambda base, new: [*lint(base, new), *cross_decode(base, new)]


def _git_show(rev: str, spec: Path) -> str | None:
    """The spec's text at `rev`, None if the file does not exist there."""
    try:
        repo = Repo.containing(spec)
    except GitError as exc:
        raise UsageError("--against needs a git checkout") from exc
    sha = repo.commit(rev)
    if sha is None:
        raise UsageError(f"unknown git revision {rev!r}")
    return repo.file_at(sha, repo.relative(spec))


def _cmd_history(args: argparse.Namespace) -> int:
    if args.format != "text":
        raise UsageError("compat --history prints text only")
    spec = Path(args.spec)
    try:
        repo = Repo.containing(spec)
    except GitError as exc:
        raise UsageError("--history needs a git checkout") from exc
    steps = walk(repo, spec, _judge(args.verify))
    for step in steps:
        print(_step_line(step))
        for f in step.findings:
            if f.severity != "info":
                print(f"    {f.severity:8} {f.rule:22} {f.path}: {f.message}")
        if step.kind == "cut":
            print(
                f"error: cannot check {step.commit}: its parent is not in this clone (shallow history);"
                " run `git fetch --unshallow` to check every step",
                file=sys.stderr,
            )
    return _history_verdict(steps, repo.relative(spec))


def _step_line(step: Step) -> str:
    """One line per step: commit, revisions, outcome."""
    head = f"{step.commit} against {step.parent}" if step.merge else step.commit
    if step.kind == "created":
        return f"{head} revision {step.revision}: creates the spec, nothing to compare"
    if step.kind == "cut":
        return f"{head} revision {step.revision}: NOT CHECKED, its parent is not in this clone"
    if step.kind == "removed":
        return f"{head} revision {step.base_revision} -> none: BREAKING, the spec was removed"
    outcome = f"BREAKING ({sum(f.severity == 'error' for f in step.findings)} error(s))"
    if not step.breaking:
        accepted = sum(f.severity == "accepted" for f in step.findings)
        outcome = f"OK ({accepted} declared break(s))" if accepted else "OK"
        if not step.findings:
            outcome += " (no wire change)"
    return f"{head} revision {step.base_revision} -> {step.revision}: {outcome}"


def _history_verdict(steps: list[Step], rel: str) -> int:
    """The summary line and the exit code: a break first, then a step that could not be checked."""
    checked = sum(s.kind == "checked" for s in steps)
    breaking = sum(s.breaking for s in steps)
    cut = sum(s.kind == "cut" for s in steps)
    code = EXIT_BREAKING if breaking else EXIT_INCOMPLETE if cut else EXIT_OK
    verdict = {EXIT_BREAKING: "BREAKING", EXIT_INCOMPLETE: "INCOMPLETE", EXIT_OK: "compatible"}[code]
    print(
        f"{rel}: {len(steps)} step(s), {checked} checked, {breaking} breaking, {cut} not checkable: {verdict}"
    )
    return code


def _report(findings: list[Finding], fmt: str, base: Spec, new: Spec) -> None:
    if fmt == "json":
        print(json.dumps([f.as_json() for f in findings], indent=2))
        return
    if fmt == "github":
        for f in findings:
            level = {"error": "error", "accepted": "warning", "info": "notice"}[f.severity]
            print(f"::{level} file={new.path},line={f.line},title={f.rule}::{f.path}: {f.message}")
        return
    for f in findings:
        print(f"{f.severity:8} {f.rule:22} {f.path}: {f.message}")
    errors = sum(f.severity == "error" for f in findings)
    verdict = "BREAKING" if errors else "compatible"
    print(
        f"{new.path} (revision {new.revision}) against revision {base.revision}: {verdict}"
        f" ({errors} error(s), {len(findings) - errors} other finding(s))"
    )


if __name__ == "__main__":
    sys.exit(main())
