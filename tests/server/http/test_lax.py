"""Pydantic's lax coercions (`vllm_server.http.openai.lax`) against pydantic itself, value by value."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import pytest
from pydantic import TypeAdapter, ValidationError

from vllm_server.http.openai.lax import coerce

STRINGS = [
    *("5", " 5 ", "+5", "-5", "05", "5.", "5.0", "5.00", "5.10", "1_0", "_10", "10_", "1__0", "1e2"),
    *("0x10", "", "  ", "\u0663", "\uff15", "5\n", "\t5", "0b1", "-0", "1_000.0", "5.0_0", "- 5", "-5.0"),
    *("0.5", " 0.5 ", ".5", "1_0.5", "nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e-1", "1E5"),
    *("5_", "1e1_0", "+.5", "inF", "\u0661.\u0665", "1.5e", "e5", "."),
    *("true", "True", "TRUE", "t", "T", "y", "yes", "YES", "on", "ON", "1", "false", "f", "n", "no"),
    *("off", "0", " true", "2", "truee", "00", "1.0", "0.0", "none", "null"),
]
NUMBERS: list[Any] = [True, False, 0, 1, 2, -1, 5, 2**70, 0.0, 1.0, 0.5, 5.0, 5.5, -3.0, None, [1], {}]


@pytest.mark.parametrize("scalar", [int, float, bool, str])
@pytest.mark.parametrize("value", STRINGS + NUMBERS, ids=repr)
def test_scalar_as_pydantic(scalar: type, value: Any) -> None:
    try:
        want: Any = TypeAdapter(scalar).validate_python(value)
    except ValidationError:
        want = ValueError
    try:
        got: Any = msgspec.convert(coerce(value, scalar), scalar, strict=True)
    except msgspec.ValidationError:
        got = ValueError
    assert repr(got) == repr(want)
    assert type(got) is type(want)


class Inner(msgspec.Struct, kw_only=True):
    flag: bool = False


class Tagged(msgspec.Struct, kw_only=True, tag_field="kind", tag="a"):
    count: int = 0


class Other(msgspec.Struct, kw_only=True, tag_field="kind", tag="b"):
    count: float = 0.0


class Outer(msgspec.Struct, kw_only=True):
    n: int | None = None
    either: int | str | None = None
    inner: Inner | None = None
    items: list[Inner] = []
    weights: dict[str, float] = {}
    bias: dict[str, float] | None = None
    choice: Tagged | Other | None = None
    effort: Literal["low", "high"] | None = None
    named: int = msgspec.field(default=0, name="renamed")


def test_the_declared_type_is_followed() -> None:
    body = {
        "n": "5",
        "either": "5",
        "inner": {"flag": "yes"},
        "items": [{"flag": "0"}, {"flag": 1}],
        "weights": {"a": "1.5"},
        "bias": {"7": "-100"},
        "choice": {"kind": "b", "count": "2"},
        "effort": "low",
        "renamed": "7",
        "unknown": "8",
    }
    got = msgspec.convert(coerce(body, Outer), Outer, strict=True)
    assert got == Outer(
        n=5,
        either="5",
        inner=Inner(flag=True),
        items=[Inner(flag=False), Inner(flag=True)],
        weights={"a": 1.5},
        bias={"7": -100.0},
        choice=Other(count=2.0),
        effort="low",
        named=7,
    )
