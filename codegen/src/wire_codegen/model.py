"""The validated model of a wire spec (what the loader produces and everything else reads)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from wire_codegen.typeref import TypeRef

Layout = Literal["named", "positional"]
Streaming = Literal["unary", "server", "bidi"]
Literal_ = bool | int | float | str | list[object] | dict[str, object] | None


@dataclass(frozen=True)
class Field:
    """One field of a struct."""

    name: str
    type: TypeRef
    line: int
    doc: str = ""
    optional: bool = False
    has_default: bool = False
    default: Literal_ = None

    @property
    def required(self) -> bool:
        """Whether a message must carry this field."""
        return not (self.optional or self.has_default)


@dataclass(frozen=True)
class Struct:
    """A struct: a msgpack map (named) or array (positional)."""

    name: str
    layout: Layout
    fields: tuple[Field, ...]
    line: int
    doc: str = ""

    def field(self, name: str) -> Field | None:
        """The field called `name`, if any."""
        return next((f for f in self.fields if f.name == name), None)


@dataclass(frozen=True)
class Enum:
    """An enum whose values are all int or all str."""

    name: str
    values: dict[str, int | str]
    line: int
    doc: str = ""

    @property
    def kind(self) -> Literal["int", "str"]:
        """Whether the values are ints or strs."""
        return "int" if all(isinstance(v, int) for v in self.values.values()) else "str"


@dataclass(frozen=True)
class Method:
    """One method of the service."""

    name: str
    request: str
    response: str
    streaming: Streaming
    line: int
    doc: str = ""


@dataclass(frozen=True)
class Service:
    """The gRPC service the spec defines."""

    name: str
    methods: tuple[Method, ...]
    line: int
    doc: str = ""

    def method(self, name: str) -> Method | None:
        """The method called `name`, if any."""
        return next((m for m in self.methods if m.name == name), None)


@dataclass(frozen=True)
class BreakingChange:
    """An intentional break that a revision declares: it passes only in that revision."""

    revision: int
    rule: str
    path: str
    reason: str
    line: int


@dataclass(frozen=True)
class Spec:
    """A whole validated spec."""

    path: str
    sha256: str
    revision: int
    service: Service
    enums: dict[str, Enum]
    structs: dict[str, Struct]
    breaking: tuple[BreakingChange, ...] = field(default=())
