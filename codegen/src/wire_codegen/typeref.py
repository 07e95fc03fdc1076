"""The type grammar of the spec: primitives, list[T], dict[K, V], tensor, names and unions.

bool int float str bytes any tensor      primitives
list[T]  dict[K, V]                     containers (dict keys: str or int)
int | str                               unions of distinct primitives (not any, not tensor)
GenerateRequest                          a struct or enum of the spec
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PRIMITIVES = ("bool", "int", "float", "str", "bytes", "any", "tensor")
UNION_MEMBERS = ("bool", "int", "float", "str", "bytes")
DICT_KEYS = ("str", "int")

_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|(\[)|(\])|(,)|(\|))")


class TypeSyntaxError(ValueError):
    """A type expression that the grammar does not accept."""


@dataclass(frozen=True)
class Prim:
    """A primitive type."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class ListOf:
    """`list[T]`."""

    item: TypeRef

    def __str__(self) -> str:
        return f"list[{self.item}]"


@dataclass(frozen=True)
class DictOf:
    """`dict[K, V]`."""

    key: TypeRef
    value: TypeRef

    def __str__(self) -> str:
        return f"dict[{self.key}, {self.value}]"


@dataclass(frozen=True)
class Union:
    """A union of distinct primitives, in spec order."""

    members: tuple[Prim, ...]

    def __str__(self) -> str:
        return " | ".join(str(m) for m in self.members)


@dataclass(frozen=True)
class Named:
    """A struct or enum declared in the spec."""

    name: str

    def __str__(self) -> str:
        return self.name


TypeRef = Prim | ListOf | DictOf | Union | Named


def parse_type(text: str) -> TypeRef:
    """Parse a type expression; raise TypeSyntaxError with what is wrong."""
    tokens = _tokenize(text)
    parser = _Parser(tokens, text)
    result = parser.union()
    if parser.pos != len(tokens):
        raise TypeSyntaxError(f"unexpected {tokens[parser.pos]!r} in type {text!r}")
    return result


def named_refs(t: TypeRef) -> list[str]:
    """Names of spec types that a type expression refers to."""
    if isinstance(t, Named):
        return [t.name]
    if isinstance(t, ListOf):
        return named_refs(t.item)
    if isinstance(t, DictOf):
        return named_refs(t.key) + named_refs(t.value)
    return []


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    stripped = text.rstrip()
    while pos < len(stripped):
        m = _TOKEN.match(stripped, pos)
        if m is None:
            raise TypeSyntaxError(f"bad character {stripped[pos]!r} in type {text!r}")
        tokens.append(m.group(0).strip())
        pos = m.end()
    if not tokens:
        raise TypeSyntaxError("empty type")
    return tokens


class _Parser:
    def __init__(self, tokens: list[str], text: str) -> None:
        self.tokens = tokens
        self.text = text
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None:
            raise TypeSyntaxError(f"type {self.text!r} ends too early")
        if expected is not None and tok != expected:
            raise TypeSyntaxError(f"expected {expected!r}, got {tok!r} in type {self.text!r}")
        self.pos += 1
        return tok

    def union(self) -> TypeRef:
        first = self.single()
        if self.peek() != "|":
            return first
        members = [first]
        while self.peek() == "|":
            self.take("|")
            members.append(self.single())
        prims: list[Prim] = []
        for m in members:
            if not isinstance(m, Prim) or m.name not in UNION_MEMBERS:
                raise TypeSyntaxError(
                    f"union members must be among {', '.join(UNION_MEMBERS)}, got {m} in {self.text!r}"
                )
            if m in prims:
                raise TypeSyntaxError(f"duplicate union member {m} in {self.text!r}")
            prims.append(m)
        return Union(tuple(prims))

    def single(self) -> TypeRef:
        name = self.take()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise TypeSyntaxError(f"expected a type name, got {name!r} in {self.text!r}")
        if name == "list":
            self.take("[")
            item = self.union()
            self.take("]")
            return ListOf(item)
        if name == "dict":
            self.take("[")
            key = self.single()
            self.take(",")
            value = self.union()
            self.take("]")
            if not isinstance(key, Prim) or key.name not in DICT_KEYS:
                raise TypeSyntaxError(f"dict keys must be str or int, got {key} in {self.text!r}")
            return DictOf(key, value)
        if name in PRIMITIVES:
            return Prim(name)
        return Named(name)
