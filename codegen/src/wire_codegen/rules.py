"""The compatibility rules as data: a stable id, a one-line purpose and a verdict per layout.

A verdict says what a change admits between adjacent revisions: `ok` (compatible) or `error`
(breaks a peer). Named structs are msgpack maps keyed by field name; positional structs are arrays,
frozen because the Rust peer's serde rejects arrays of another length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Verdict = Literal["ok", "error"]
Subject = Literal["struct", "field", "enum", "rpc", "spec"]


@dataclass(frozen=True)
class Rule:
    """One compatibility rule: what it catches and the verdict per layout."""

    id: str
    subject: Subject
    purpose: str
    named: Verdict
    positional: Verdict

    def verdict(self, layout: str | None) -> Verdict:
        """The verdict for a struct of `layout`; other subjects use `named`."""
        return self.positional if layout == "positional" else self.named


def _rule(
    id: str,
    subject: Subject,
    purpose: str,
    named: Verdict = "error",
    positional: Verdict | None = None,
) -> Rule:
    return Rule(id, subject, purpose, named, named if positional is None else positional)


RULES: tuple[Rule, ...] = (
    _rule("STRUCT_ADD", "struct", "A struct was added.", "ok"),
    _rule("STRUCT_NO_DELETE", "struct", "A struct must not be removed."),
    _rule("STRUCT_SAME_LAYOUT", "struct", "A struct must not switch between named and positional."),
    _rule("FIELD_ADD_OPTIONAL", "field", "An optional or defaulted field was added.", "ok", "error"),
    _rule("FIELD_ADD_REQUIRED", "field", "A field without a default must not be added."),
    _rule("FIELD_NO_DELETE", "field", "A field must not be removed."),
    _rule("FIELD_SAME_NAME", "field", "A field must not be renamed."),
    _rule("FIELD_SAME_POSITION", "field", "A field must keep its position.", "ok", "error"),
    _rule("FIELD_SAME_TYPE", "field", "A field must keep its type, optionality included."),
    _rule(
        "FIELD_SAME_DEFAULT",
        "field",
        "A field must keep its default (defaults are omitted on the wire).",
    ),
    _rule("ENUM_ADD", "enum", "An enum was added.", "ok"),
    _rule("ENUM_NO_DELETE", "enum", "An enum must not be removed."),
    _rule("ENUM_VALUE_ADD", "enum", "An enum must not gain values (old readers reject them)."),
    _rule("ENUM_VALUE_NO_DELETE", "enum", "An enum must not lose values."),
    _rule("ENUM_VALUE_SAME_VALUE", "enum", "An enum member must keep its wire value."),
    _rule("RPC_ADD", "rpc", "A method was added.", "ok"),
    _rule("RPC_NO_DELETE", "rpc", "A method must not be removed."),
    _rule("RPC_SAME_REQUEST_TYPE", "rpc", "A method must keep its request type."),
    _rule("RPC_SAME_RESPONSE_TYPE", "rpc", "A method must keep its response type."),
    _rule("RPC_SAME_STREAMING", "rpc", "A method must keep its streaming kind."),
    _rule("SERVICE_SAME_NAME", "rpc", "The service must keep its name (it is in every method path)."),
    _rule(
        "REVISION_BUMP",
        "spec",
        "A revision that changes the wire must be the previous revision + 1.",
    ),
)

RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
