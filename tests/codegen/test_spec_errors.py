"""A spec with an error gets a message naming the file, line and problem, and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.codegen_cli import COMPAT_FIXTURES, Cli

BASE = (COMPAT_FIXTURES / "REVISION_BUMP" / "base.yaml").read_text()


def _line_of(text: str, needle: str) -> int:
    return [i for i, line in enumerate(text.splitlines(), 1) if needle in line][-1]


CASES = [
    # (name, replace this, with this, line containing, problem words)
    (
        "unknown type",
        "{name: a, type: int}",
        "{name: a, type: Missing}",
        "name: a,",
        "unknown type 'Missing'",
    ),
    ("bad type syntax", "{name: a, type: int}", '{name: a, type: "list[int"}', "name: a,", "ends too early"),
    (
        "duplicate field",
        "{name: b, type: str, optional: true}",
        "{name: a, type: str, optional: true}",
        "name: a, type: str",
        "duplicate field 'a'",
    ),
    ("duplicate yaml key", "  Extra:\n", "  Req:\n", "  Req:", "duplicate key 'Req'"),
    ("struct and enum share a name", "  Extra:\n", "  Color:\n", "  Color:", "duplicate type name 'Color'"),
    (
        "bad default type",
        "{name: c, type: int, default: 0}",
        '{name: c, type: int, default: "zero"}',
        "name: c,",
        "bad default",
    ),
    (
        "default on a struct",
        "{name: c, type: int, default: 0}",
        "{name: c, type: Extra, default: 1}",
        "name: c,",
        "a struct field cannot have a default",
    ),
    (
        "optional and default",
        "{name: c, type: int, default: 0}",
        "{name: c, type: int, default: 0, optional: true}",
        "name: c,",
        "not both",
    ),
    ("mixed enum", "{red: 0, green: 1}", "{red: 0, green: g}", "red: 0", "all int or all str"),
    (
        "optional before required in positional",
        "      - {name: z, type: bool, default: false}\n",
        "      - {name: z, type: bool, default: false}\n      - {name: q, type: int}\n",
        "name: q",
        "optional fields come last",
    ),
    (
        "method names an unknown type",
        "{name: Do, request: Req, response: Req}",
        "{name: Do, request: Nope, response: Req}",
        "name: Do",
        "request type 'Nope' is unknown",
    ),
    (
        "method names an enum",
        "{name: Do, request: Req, response: Req}",
        "{name: Do, request: Color, response: Req}",
        "name: Do",
        "is an enum",
    ),
    ("bad layout", "    layout: positional\n", "    layout: tuple\n", "layout: tuple", "layout must be"),
    (
        "unknown key",
        "{name: a, type: int}",
        "{name: a, type: int, optinal: true}",
        "name: a,",
        "unknown key 'optinal'",
    ),
    ("bad revision", "revision: 1", "revision: zero", "revision:", "revision must be a positive integer"),
    (
        "invalid yaml",
        "    fields:\n      - {name: a, type: int}",
        "    fields:\n      - {name: a, type: int",
        "name: a,",
        "invalid YAML",
    ),
]


@pytest.mark.parametrize(("name", "old", "new", "needle", "problem"), CASES, ids=[c[0] for c in CASES])
def test_spec_error_names_file_line_and_problem(
    cli: Cli, tmp_path: Path, name: str, old: str, new: str, needle: str, problem: str
) -> None:
    assert old in BASE, name
    text = BASE.replace(old, new, 1)
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    result = cli("gen", "--spec", str(path), "--root", str(tmp_path), "--check")
    assert result.code == 2
    line = _line_of(text, needle)
    message = result.err.strip()
    assert message.startswith("error: "), message
    assert message.split(":")[1].strip().endswith("bad.yaml"), message
    reported_line = int(message.split(":")[2])
    # A YAML syntax error is reported where the parser noticed it, at or just after the bad line.
    assert reported_line == line or (name == "invalid yaml" and line <= reported_line <= line + 2), message
    assert problem in message
    # The linter refuses the same spec with the same message.
    lint = cli("compat", "--base", str(COMPAT_FIXTURES / "REVISION_BUMP" / "base.yaml"), "--spec", str(path))
    assert lint.code == 2
    assert problem in lint.err
