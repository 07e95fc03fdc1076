"""`wire-codegen`: generate from spec/ (`gen`, `gen --check`) and lint changes (`compat`).

`gen` writes every generated file: from spec/llm.yaml the wire package, the client stub, the compat
rules and docs/wire.md; from spec/proto/ the public gRPC API's protobuf modules.
Exit codes: 0 fine, 1 stale generated files (`gen --check`), 2 usage, spec or protoc error,
100 breaking changes (`compat`).
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from wire_codegen.compat import Finding, is_breaking, lint
from wire_codegen.loader import SpecError, load_spec, load_spec_text
from wire_codegen.model import Spec
from wire_codegen.protos import ProtocError, orphans, render_protos
from wire_codegen.render import render

EXIT_OK = 0
EXIT_STALE = 1
EXIT_USAGE = 2
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
    except (UsageError, ProtocError) as exc:
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
    findings = lint(base, new)
    if args.verify:
        from wire_codegen.verify import verify

        findings.extend(verify(base, new))
    _report(findings, args.format, base, new)
    return EXIT_BREAKING if is_breaking(findings) else EXIT_OK


def _git_show(rev: str, spec: Path) -> str | None:
    """The spec's text at `rev`, None if the file does not exist there."""
    directory = spec.resolve().parent
    top = _git(["rev-parse", "--show-toplevel"], directory)
    if top is None:
        raise UsageError("--against needs a git checkout")
    if _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], directory) is None:
        raise UsageError(f"unknown git revision {rev!r}")
    rel = spec.resolve().relative_to(Path(top.strip()).resolve()).as_posix()
    return _git(["show", f"{rev}:{rel}"], directory)


def _git(args: list[str], cwd: Path) -> str | None:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    return proc.stdout if proc.returncode == 0 else None


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
