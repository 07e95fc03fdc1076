"""The compat linter: judge every change between two revisions of the spec.

Helpers walk the matched old/new pairs (structs, fields, enums, enum values, methods); each rule is one
small function that judges one pair and states what it finds as a fact. The verdict for a finding comes
from the base revision's compatibility table, so the linter and docs/wire.md cannot disagree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, TypeVar

from wire_codegen.model import Enum, Field, Method, Spec, Struct
from wire_codegen.table import CompatTable, compat_table, verdict

Severity = Literal["error", "info", "accepted"]


@dataclass(frozen=True)
class Finding:
    """One change the linter found: rule id, severity, path and a message worded as a fact."""

    rule: str
    severity: Severity
    path: str
    message: str
    line: int = 0

    def as_json(self) -> dict[str, str]:
        """The JSON form: {rule, severity, path, message}."""
        return {
            "rule": self.rule,
            "severity": self.severity,
            "path": self.path,
            "message": self.message,
        }


@dataclass(frozen=True)
class _Change:
    rule: str
    path: str
    message: str
    line: int
    struct: str | None = None
    enum: str | None = None
    method: str | None = None


# ---- pair walkers -------------------------------------------------------------------------------


_T = TypeVar("_T")


def _pairs(old: dict[str, _T], new: dict[str, _T]) -> Iterator[tuple[str, _T | None, _T | None]]:
    for name in [*old, *(n for n in new if n not in old)]:
        yield name, old.get(name), new.get(name)


FieldPair = tuple[int | None, Field | None, int | None, Field | None]


def field_pairs(old: Struct, new: Struct) -> list[FieldPair]:
    """Match fields by name; an unmatched old and new field at one position with one type is a rename."""
    new_names = {f.name for f in new.fields}
    old_names = {f.name for f in old.fields}
    pairs: list[FieldPair] = []
    renamed_new: set[str] = set()
    for i, f in enumerate(old.fields):
        if f.name in new_names:
            j = next(k for k, g in enumerate(new.fields) if g.name == f.name)
            pairs.append((i, f, j, new.fields[j]))
            continue
        cand = new.fields[i] if i < len(new.fields) else None
        if cand is not None and cand.name not in old_names and str(cand.type) == str(f.type):
            renamed_new.add(cand.name)
            pairs.append((i, f, i, cand))
        else:
            pairs.append((i, f, None, None))
    for j, g in enumerate(new.fields):
        if g.name not in old_names and g.name not in renamed_new:
            pairs.append((None, None, j, g))
    return pairs


# ---- struct rules -------------------------------------------------------------------------------


def _struct_changes(old: Struct | None, new: Struct | None, name: str) -> Iterator[_Change]:
    if old is None and new is not None:
        yield _Change("STRUCT_ADD", name, f"struct `{name}` was added", new.line)
        return
    if old is not None and new is None:
        yield _Change("STRUCT_NO_DELETE", name, f"struct `{name}` was removed", old.line, struct=name)
        return
    assert old is not None and new is not None
    if old.layout != new.layout:
        yield _Change(
            "STRUCT_SAME_LAYOUT",
            name,
            f"struct `{name}` changed layout from {old.layout} to {new.layout}",
            new.line,
            struct=name,
        )
        return
    for pair in field_pairs(old, new):
        for judge in FIELD_JUDGES:
            for rule, message in judge(pair):
                _, of, _, nf = pair
                field_name = (of or nf).name  # type: ignore[union-attr]
                line = nf.line if nf is not None else new.line
                yield _Change(rule, f"{name}.{field_name}", message.format(s=name), line, struct=name)


FieldJudge = Callable[[FieldPair], Iterator[tuple[str, str]]]


def _field_add(pair: FieldPair) -> Iterator[tuple[str, str]]:
    _, of, j, nf = pair
    if of is None and nf is not None:
        if nf.required:
            yield (
                "FIELD_ADD_REQUIRED",
                f"required field `{nf.name}` was added to `{{s}}` at position {j}",
            )
        else:
            yield (
                "FIELD_ADD_OPTIONAL",
                f"optional field `{nf.name}` was added to `{{s}}` at position {j}",
            )


def _field_no_delete(pair: FieldPair) -> Iterator[tuple[str, str]]:
    _, of, _, nf = pair
    if of is not None and nf is None:
        yield "FIELD_NO_DELETE", f"field `{of.name}` of `{{s}}` was removed"


def _field_same_name(pair: FieldPair) -> Iterator[tuple[str, str]]:
    _, of, _, nf = pair
    if of is not None and nf is not None and of.name != nf.name:
        yield "FIELD_SAME_NAME", f"field `{of.name}` of `{{s}}` was renamed to `{nf.name}`"


def _field_same_position(pair: FieldPair) -> Iterator[tuple[str, str]]:
    i, of, j, nf = pair
    if of is not None and nf is not None and i != j:
        yield "FIELD_SAME_POSITION", f"field `{of.name}` of `{{s}}` moved from position {i} to {j}"


def _type_text(f: Field) -> str:
    return f"{f.type} (optional)" if f.optional else str(f.type)


def _field_same_type(pair: FieldPair) -> Iterator[tuple[str, str]]:
    _, of, _, nf = pair
    if of is not None and nf is not None and _type_text(of) != _type_text(nf):
        yield (
            "FIELD_SAME_TYPE",
            (f"field `{of.name}` of `{{s}}` changed type from {_type_text(of)} to {_type_text(nf)}"),
        )


def _default_text(f: Field) -> str:
    return repr(f.default) if f.has_default else "none"


def _field_same_default(pair: FieldPair) -> Iterator[tuple[str, str]]:
    _, of, _, nf = pair
    if of is None or nf is None:
        return
    if (of.has_default, of.default) != (nf.has_default, nf.default) or type(of.default) is not type(
        nf.default
    ):
        yield (
            "FIELD_SAME_DEFAULT",
            (
                f"field `{of.name}` of `{{s}}` changed its default from "
                f"{_default_text(of)} to {_default_text(nf)}"
            ),
        )


FIELD_JUDGES: tuple[FieldJudge, ...] = (
    _field_add,
    _field_no_delete,
    _field_same_name,
    _field_same_position,
    _field_same_type,
    _field_same_default,
)


# ---- enum rules ---------------------------------------------------------------------------------


def _enum_changes(old: Enum | None, new: Enum | None, name: str) -> Iterator[_Change]:
    if old is None and new is not None:
        yield _Change("ENUM_ADD", name, f"enum `{name}` was added", new.line)
        return
    if old is not None and new is None:
        yield _Change("ENUM_NO_DELETE", name, f"enum `{name}` was removed", old.line, enum=name)
        return
    assert old is not None and new is not None
    for member, ov, nv in _pairs(old.values, new.values):
        path = f"{name}.{member}"
        if ov is None:
            yield _Change(
                "ENUM_VALUE_ADD",
                path,
                f"value `{member}` = {nv!r} was added to enum `{name}`",
                new.line,
                enum=name,
            )
        elif nv is None:
            yield _Change(
                "ENUM_VALUE_NO_DELETE",
                path,
                f"value `{member}` was removed from enum `{name}`",
                new.line,
                enum=name,
            )
        elif ov != nv or type(ov) is not type(nv):
            yield _Change(
                "ENUM_VALUE_SAME_VALUE",
                path,
                f"value `{member}` of enum `{name}` changed from {ov!r} to {nv!r}",
                new.line,
                enum=name,
            )


# ---- rpc rules ----------------------------------------------------------------------------------


def _method_changes(old: Method | None, new: Method | None, name: str, service: str) -> Iterator[_Change]:
    path = f"{service}/{name}"
    if old is None and new is not None:
        yield _Change("RPC_ADD", path, f"method `{name}` was added", new.line)
        return
    if old is not None and new is None:
        yield _Change("RPC_NO_DELETE", path, f"method `{name}` was removed", old.line, method=name)
        return
    assert old is not None and new is not None
    if old.request != new.request:
        yield _Change(
            "RPC_SAME_REQUEST_TYPE",
            path,
            f"method `{name}` changed its request from `{old.request}` to `{new.request}`",
            new.line,
            method=name,
        )
    if old.response != new.response:
        yield _Change(
            "RPC_SAME_RESPONSE_TYPE",
            path,
            f"method `{name}` changed its response from `{old.response}` to `{new.response}`",
            new.line,
            method=name,
        )
    if old.streaming != new.streaming:
        yield _Change(
            "RPC_SAME_STREAMING",
            path,
            f"method `{name}` changed from {old.streaming} to {new.streaming} streaming",
            new.line,
            method=name,
        )


# ---- the linter ---------------------------------------------------------------------------------


def _changes(base: Spec, new: Spec) -> list[_Change]:
    out: list[_Change] = []
    for name, o, n in _pairs(base.structs, new.structs):
        out.extend(_struct_changes(o, n, name))
    for name, oe, ne in _pairs(base.enums, new.enums):
        out.extend(_enum_changes(oe, ne, name))
    if base.service.name != new.service.name:
        out.append(
            _Change(
                "SERVICE_SAME_NAME",
                base.service.name,
                f"service `{base.service.name}` was renamed to `{new.service.name}`",
                new.service.line,
                method="",
            )
        )
    old_methods = {m.name: m for m in base.service.methods}
    new_methods = {m.name: m for m in new.service.methods}
    for name, om, nm in _pairs(old_methods, new_methods):
        out.extend(_method_changes(om, nm, name, base.service.name))
    return out


def lint(base: Spec, new: Spec) -> list[Finding]:
    """Every change from `base` to `new`, judged by the base revision's compatibility table."""
    table: CompatTable = compat_table(base)
    changes = _changes(base, new)
    if changes and new.revision != base.revision + 1:
        changes.append(
            _Change(
                "REVISION_BUMP",
                "revision",
                f"the wire changed but revision is {new.revision}; it must be "
                f"{base.revision + 1} (base revision {base.revision} + 1)",
                1,
            )
        )
    declared = {(b.rule, b.path): b for b in new.breaking if b.revision == new.revision}
    findings: list[Finding] = []
    for c in changes:
        v = verdict(table, c.rule, struct=c.struct, enum=c.enum, method=c.method)
        if v == "ok":
            findings.append(Finding(c.rule, "info", c.path, c.message, c.line))
        elif (c.rule, c.path) in declared:
            reason = declared.pop((c.rule, c.path)).reason
            findings.append(
                Finding(c.rule, "accepted", c.path, f"{c.message} (declared break: {reason})", c.line)
            )
        else:
            findings.append(Finding(c.rule, "error", c.path, c.message, c.line))
    for (rule, path), b in declared.items():
        findings.append(
            Finding(
                rule,
                "info",
                path,
                f"revision {b.revision} declares a break of {rule} at `{path}` that did not happen",
                b.line,
            )
        )
    return findings


def is_breaking(findings: list[Finding]) -> bool:
    """Whether any finding is an error."""
    return any(f.severity == "error" for f in findings)
