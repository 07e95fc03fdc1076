"""The generated wire types: they match the spec, round-trip, and encode as their layout says."""

from __future__ import annotations

import enum
from typing import Any

import msgspec
import msgspec.inspect as mi
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vllm_llm.wire as wire
from tests.support.codegen_cli import ROOT
from wire_codegen.loader import load_spec
from wire_codegen.model import Field, Spec
from wire_codegen.typeref import Named

SPEC: Spec = load_spec(ROOT / "spec" / "llm.yaml")
STRUCTS = sorted(SPEC.structs)

_JSON_LIKE: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def strategy(info: mi.Type) -> st.SearchStrategy[Any]:
    """Values of a msgspec type, built from its `msgspec.inspect` description."""
    if isinstance(info, mi.StructType):
        if info.cls is wire.Tensor:
            return st.lists(st.integers(0, 3), max_size=3).map(
                lambda shape: wire.Tensor.from_bytes("float32", shape, bytes(4 * _prod(shape)))
            )
        required = {f.name: strategy(f.type) for f in info.fields if f.required}
        optional = {f.name: strategy(f.type) for f in info.fields if not f.required}
        return st.fixed_dictionaries(required, optional=optional).map(lambda kw: info.cls(**kw))
    simple: dict[type[mi.Type], st.SearchStrategy[Any]] = {
        mi.BoolType: st.booleans(),
        mi.IntType: st.integers(-(2**63), 2**64 - 1),
        mi.FloatType: st.floats(allow_nan=False),
        mi.StrType: st.text(max_size=8),
        mi.BytesType: st.binary(max_size=8),
        mi.AnyType: _JSON_LIKE,
        mi.NoneType: st.none(),
    }
    if type(info) in simple:
        return simple[type(info)]
    if isinstance(info, mi.ListType):
        return st.lists(strategy(info.item_type), max_size=3)
    if isinstance(info, mi.DictType):
        return st.dictionaries(strategy(info.key_type), strategy(info.value_type), max_size=3)
    if isinstance(info, mi.EnumType):
        return st.sampled_from(list(info.cls))
    if isinstance(info, mi.UnionType):
        return st.one_of([strategy(t) for t in info.types])
    raise TypeError(f"no strategy for {info!r}")


def _prod(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


@pytest.mark.parametrize("name", STRUCTS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_struct_round_trips_through_msgpack(name: str, data: st.DataObject) -> None:
    cls = getattr(wire, name)
    value = data.draw(strategy(mi.type_info(cls)))
    assert wire.decode(wire.encode(value), cls) == value


#: Spec type -> the Python type the generated class must carry, written by hand (not by the renderer
#: under test); every container and primitive type the spec uses needs a row. Struct and enum names
#: stand for themselves.
EXPECTED_TYPE = {
    "bool": "bool",
    "int": "int",
    "float": "float",
    "str": "str",
    "any": "Any",
    "tensor": "Tensor",
    "int | str": "int | str",
    "list[int]": "list[int]",
    "list[float]": "list[float]",
    "list[str]": "list[str]",
    "list[list[int]]": "list[list[int]]",
    "list[KvHintAction]": "list[KvHintAction]",
    "list[LogprobRow]": "list[LogprobRow]",
    "list[MultiModalFeature]": "list[MultiModalFeature]",
    "list[LoraAdapter]": "list[LoraAdapter]",
    "list[GenerateRequest]": "list[GenerateRequest]",
    "list[GenerateOutput]": "list[GenerateOutput]",
    "list[MuxError]": "list[MuxError]",
    "dict[int, float]": "dict[int, float]",
    "dict[str, str]": "dict[str, str]",
    "dict[str, any]": "dict[str, Any]",
    "dict[str, tensor]": "dict[str, Tensor]",
}


def _expected_type(f: Field) -> str:
    spelled = str(f.type)
    if spelled in SPEC.structs or spelled in SPEC.enums:
        expected = spelled
    else:
        assert spelled in EXPECTED_TYPE, f"{f.name}: add the spec type {spelled!r} to EXPECTED_TYPE"
        expected = EXPECTED_TYPE[spelled]
    return f"{expected} | None" if f.optional else expected


def _shape(info: mi.Type) -> str:
    """A msgspec type as the Python annotation that means it (`list[int] | None`, `Tensor`, ...)."""
    if isinstance(info, mi.StructType | mi.EnumType):
        return info.cls.__name__
    if isinstance(info, mi.ListType):
        return f"list[{_shape(info.item_type)}]"
    if isinstance(info, mi.DictType):
        return f"dict[{_shape(info.key_type)}, {_shape(info.value_type)}]"
    if isinstance(info, mi.UnionType):
        return " | ".join(_shape(t) for t in info.types)
    simple: dict[type[mi.Type], str] = {
        mi.BoolType: "bool",
        mi.IntType: "int",
        mi.FloatType: "float",
        mi.StrType: "str",
        mi.BytesType: "bytes",
        mi.AnyType: "Any",
        mi.NoneType: "None",
    }
    return simple[type(info)]


@pytest.mark.parametrize("name", STRUCTS)
def test_generated_class_matches_the_spec(name: str) -> None:
    spec_struct = SPEC.structs[name]
    info = mi.type_info(getattr(wire, name))
    assert isinstance(info, mi.StructType)
    assert info.array_like is (spec_struct.layout == "positional")
    assert info.forbid_unknown_fields is False
    assert [f.name for f in info.fields] == [f.name for f in spec_struct.fields]
    assert [f.encode_name for f in info.fields] == [f.name for f in spec_struct.fields]
    for f, sf in zip(info.fields, spec_struct.fields, strict=True):
        assert f.required is sf.required, sf.name
        if sf.optional:
            assert f.default is None
        elif sf.has_default:
            expected = sf.default
            if isinstance(sf.type, Named) and sf.type.name in SPEC.enums:
                expected = getattr(getattr(wire, sf.type.name), str(sf.default).upper())
            actual = f.default if f.default is not msgspec.NODEFAULT else f.default_factory()
            assert actual == expected, sf.name
            assert type(actual) is type(expected) or isinstance(expected, int), sf.name
    # The annotations as written, and the types msgspec resolved from them (what it decodes against).
    expected = {f.name: _expected_type(f) for f in spec_struct.fields}
    annotations = getattr(wire, name).__annotations__
    assert {k: str(v) for k, v in annotations.items()} == expected
    assert {f.name: _shape(f.type) for f in info.fields} == expected


@pytest.mark.parametrize("name", sorted(SPEC.enums))
def test_generated_enum_matches_the_spec(name: str) -> None:
    cls: type[enum.Enum] = getattr(wire, name)
    assert {m.name: m.value for m in cls} == {k.upper(): v for k, v in SPEC.enums[name].values.items()}


def test_method_table_matches_the_spec() -> None:
    assert SPEC.service.name == wire.SERVICE_NAME
    assert [
        (m.name, m.path, m.streaming, m.request_type.__name__, m.response_type.__name__) for m in wire.METHODS
    ] == [
        (m.name, f"/{SPEC.service.name}/{m.name}", m.streaming, m.request, m.response)
        for m in SPEC.service.methods
    ]
    assert SPEC.revision == wire.WIRE_REVISION
    assert SPEC.sha256 == wire.SPEC_SHA256


@pytest.mark.parametrize("name", [n for n in STRUCTS if SPEC.structs[n].layout == "positional"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_positional_structs_encode_as_arrays(name: str, data: st.DataObject) -> None:
    value = data.draw(strategy(mi.type_info(getattr(wire, name))))
    raw = msgspec.msgpack.decode(wire.encode(value))
    assert isinstance(raw, list)
    assert len(raw) == len(SPEC.structs[name].fields)


@pytest.mark.parametrize("name", [n for n in STRUCTS if SPEC.structs[n].layout == "named"])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_named_structs_encode_as_maps_without_none_fields(name: str, data: st.DataObject) -> None:
    value = data.draw(strategy(mi.type_info(getattr(wire, name))))
    raw = msgspec.msgpack.decode(wire.encode(value))
    assert isinstance(raw, dict)
    spec_struct = SPEC.structs[name]
    for f in spec_struct.fields:
        v = getattr(value, f.name)
        if f.optional and v is None:
            assert f.name not in raw
        elif f.required:
            assert f.name in raw
    assert set(raw) <= {f.name for f in spec_struct.fields}


def test_named_struct_ignores_unknown_fields() -> None:
    raw = msgspec.msgpack.encode({"request_ids": ["a"], "added_in_a_later_revision": {"x": 1}})
    assert wire.decode(raw, wire.AbortRequest) == wire.AbortRequest(request_ids=["a"])


def test_tensor_rejects_inconsistent_sizes() -> None:
    bad = msgspec.msgpack.encode(["float32", [2, 2], msgspec.msgpack.Ext(3, b"\0" * 15)])
    with pytest.raises(msgspec.ValidationError, match="needs 16 bytes"):
        wire.decode(bad, wire.Tensor)
