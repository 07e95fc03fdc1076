"""`python -m vllm_server.protogen gen | check`: the public gRPC API's Python code from its .proto files.

grpcio-tools compiles `packages/server/proto/vllm/*.proto` (package `vllm`) into `vllm_server/grpc/proto/`:
`<name>_pb2.py` (messages), `<name>_pb2.pyi` (their type stubs) and `<name>_pb2_grpc.py` (stubs,
servicers). The output is deterministic (protoc is given relative paths, and writes no timestamps) and
post-processed in two ways only:

- a header naming the .proto and its sha256, saying DO NOT EDIT, and turning ruff and mypy off for the
  file (`# ruff: noqa`, `# fmt: off`, `# mypy: ignore-errors`: generated code follows protoc's style);
- `from vllm import x_pb2` becomes `from vllm_server.grpc.proto import x_pb2`, since `vllm` is vLLM's own
  package (the descriptors keep the proto names `vllm/*.proto`).

`check` regenerates into a temporary directory and exits 1 with a unified diff when a checked-in file is
stale, missing or extra; 2 means protoc failed.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import re
import sys
import tempfile
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

EXIT_OK = 0
EXIT_STALE = 1
EXIT_ERROR = 2

#: The proto root: `packages/server/proto`, holding `vllm/*.proto`.
PROTO_ROOT = Path(__file__).resolve().parents[2] / "proto"
PROTO_PACKAGE = "vllm"
#: Where the generated modules live (a package).
OUTPUT_DIR = Path(__file__).resolve().parent / "grpc" / "proto"
OUTPUT_MODULE = "vllm_server.grpc.proto"

_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
#: Where the generated code names its modules `vllm.<name>_pb2`.
_MODULE_NAMES = (
    (
        re.compile(rf"^from {PROTO_PACKAGE} import (\w+_pb2) as ", re.MULTILINE),
        rf"from {OUTPUT_MODULE} import \1 as ",
    ),
    (
        re.compile(rf"(BuildTopDescriptorsAndMessages\(DESCRIPTOR, )'{PROTO_PACKAGE}\.(\w+_pb2)'"),
        rf"\1'{OUTPUT_MODULE}.\2'",
    ),
)
#: The repository root (diffs name files relative to it).
_REPO_ROOT = PROTO_ROOT.parents[2]


class ProtocError(Exception):
    """grpcio-tools rejected the .proto files."""


def proto_files(root: Path = PROTO_ROOT) -> list[str]:
    """The .proto files to compile, relative to `root` (`vllm/control.proto`, ...), sorted."""
    return sorted(p.relative_to(root).as_posix() for p in (root / PROTO_PACKAGE).glob("*.proto"))


def generate(root: Path = PROTO_ROOT) -> dict[str, str]:
    """Every generated file: file name in the output package -> text."""
    protos = proto_files(root)
    outputs: dict[str, str] = {"__init__.py": _package_init(root, protos)}
    with tempfile.TemporaryDirectory(prefix="protogen-") as tmp:
        _protoc(root, protos, Path(tmp))
        for proto in protos:
            stem = Path(proto).stem
            header = _header(proto, _sha256(root / proto))
            for suffix in _SUFFIXES:
                raw = (Path(tmp) / PROTO_PACKAGE / f"{stem}{suffix}").read_text(encoding="utf-8")
                outputs[f"{stem}{suffix}"] = header + _renamed(raw)
    return dict(sorted(outputs.items()))


def write(outputs: dict[str, str], out_dir: Path = OUTPUT_DIR) -> list[str]:
    """Write `outputs` into `out_dir`, removing generated files no longer produced; the names written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in sorted(set(_checked_in(out_dir)) - set(outputs)):
        (out_dir / stale).unlink()
    written = []
    for name, text in outputs.items():
        path = out_dir / name
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            written.append(name)
    return written


def diff(outputs: dict[str, str], out_dir: Path = OUTPUT_DIR) -> str:
    """The unified diff from the checked-in files to `outputs` (empty when up to date)."""
    chunks: list[str] = []
    for name in sorted(set(outputs) | set(_checked_in(out_dir))):
        path = out_dir / name
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        new = outputs.get(name, "")
        if old != new:
            shown = _display(path)
            chunks.extend(
                difflib.unified_diff(
                    old.splitlines(keepends=True),
                    new.splitlines(keepends=True),
                    fromfile=f"a/{shown}" if path.exists() else "/dev/null",
                    tofile=f"b/{shown}" if name in outputs else "/dev/null",
                )
            )
    return "".join(chunks)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `gen` or `check`; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m vllm_server.protogen", description=__doc__.splitlines()[0]
    )
    parser.add_argument("command", choices=("gen", "check"), help="write the files, or check them")
    args = parser.parse_args(argv)
    try:
        outputs = generate()
    except ProtocError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    if args.command == "gen":
        written = write(outputs)
        print(f"protogen: {len(written)} of {len(outputs)} file(s) written to {OUTPUT_MODULE}")
        return EXIT_OK
    stale = diff(outputs)
    if stale:
        sys.stdout.write(stale)
        print(
            f"protogen: {OUTPUT_MODULE} is stale; run `python -m vllm_server.protogen gen`", file=sys.stderr
        )
        return EXIT_STALE
    print(f"protogen: {len(outputs)} file(s) in {OUTPUT_MODULE} are up to date")
    return EXIT_OK


# ---- steps ----------------------------------------------------------------------------------------------


def _protoc(root: Path, protos: Sequence[str], out: Path) -> None:
    from grpc_tools import protoc  # type: ignore[import-untyped]  # dev dependency, untyped

    well_known = resources.files("grpc_tools") / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={root}",
        f"--proto_path={well_known}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise ProtocError(f"protoc failed on {', '.join(protos)} (its messages are above)")


def _renamed(code: str) -> str:
    for pattern, replacement in _MODULE_NAMES:
        code = pattern.sub(replacement, code)
    return code


def _header(proto: str, sha256: str) -> str:
    return (
        f"# Generated by `python -m vllm_server.protogen gen` (grpcio-tools) from {proto}\n"
        f"# (sha256 {sha256}). DO NOT EDIT.\n"
        "# ruff: noqa\n"
        "# fmt: off\n"
        "# mypy: ignore-errors\n"
    )


def _package_init(root: Path, protos: Sequence[str]) -> str:
    lines = [f"#   {proto} (sha256 {_sha256(root / proto)})\n" for proto in protos]
    return (
        "# Generated by `python -m vllm_server.protogen gen` (grpcio-tools) from\n"
        + "".join(lines)
        + "# DO NOT EDIT.\n"
        + f'"""The public gRPC API (proto package `{PROTO_PACKAGE}`): messages, stubs and servicers."""\n'
    )


def _display(path: Path) -> str:
    try:
        return path.relative_to(_REPO_ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _checked_in(out_dir: Path) -> list[str]:
    if not out_dir.is_dir():
        return []
    names = [p.name for p in out_dir.iterdir() if p.is_file() and p.name.endswith(_SUFFIXES)]
    return sorted([*names, "__init__.py"] if (out_dir / "__init__.py").exists() else names)


if __name__ == "__main__":
    sys.exit(main())
