"""The per-type compatibility table: for every struct, enum and method, what changes it admits.

Derived from the spec (a struct's admissions follow its layout). The generator writes it as JSON next
to the wire types and renders it into docs/wire.md; the linter reads the base revision's table to
judge each change.
"""

from __future__ import annotations

from typing import Any

from wire_codegen.model import Spec
from wire_codegen.rules import RULES, RULES_BY_ID, Verdict

CompatTable = dict[str, Any]


def compat_table(spec: Spec) -> CompatTable:
    """The compatibility table of `spec`."""
    structs = {
        name: {"layout": s.layout, "admits": _admits(("struct", "field"), s.layout)}
        for name, s in spec.structs.items()
    }
    enums = {name: {"kind": e.kind, "admits": _admits(("enum",), None)} for name, e in spec.enums.items()}
    methods = {
        m.name: {"path": f"/{spec.service.name}/{m.name}", "admits": _admits(("rpc",), None)}
        for m in spec.service.methods
    }
    return {
        "revision": spec.revision,
        "service": spec.service.name,
        "rules": {r.id: r.purpose for r in RULES},
        "structs": structs,
        "enums": enums,
        "methods": methods,
        "spec": {"admits": _admits(("spec",), None)},
    }


def verdict(
    table: CompatTable,
    rule: str,
    *,
    struct: str | None = None,
    enum: str | None = None,
    method: str | None = None,
) -> Verdict:
    """What `table` says of `rule` for the named struct, enum or method (or for the spec)."""
    if struct is not None:
        entry = table["structs"].get(struct)
    elif enum is not None:
        entry = table["enums"].get(enum)
    elif method is not None:
        entry = table["methods"].get(method)
    else:
        entry = table["spec"]
    if entry is not None and rule in entry["admits"]:
        return entry["admits"][rule]  # type: ignore[no-any-return]
    # Something the base revision does not have (an addition): the rule's own verdict.
    return RULES_BY_ID[rule].verdict(None)


def _admits(subjects: tuple[str, ...], layout: str | None) -> dict[str, Verdict]:
    return {r.id: r.verdict(layout) for r in RULES if r.subject in subjects}
