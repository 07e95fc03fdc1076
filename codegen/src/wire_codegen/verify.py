"""`compat --verify`: generate both revisions and cross-decode sample values under msgspec.

Where the rule table says what *should* break (for every peer, the Rust one included), this reports
what *actually* fails under msgspec: for every changed struct and enum, sample values encoded with one
revision's classes are decoded with the other's, old → new and new → old.
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import msgspec
import msgspec.inspect as mi

from wire_codegen.compat import Finding
from wire_codegen.model import Spec, Struct
from wire_codegen.render import STRUCTS_PATH, render

RULE = "VERIFY_DECODE"


def verify(base: Spec, new: Spec) -> list[Finding]:
    """Findings for every changed type whose values fail to cross-decode between the revisions."""
    with tempfile.TemporaryDirectory(prefix="wire-verify-") as tmp:
        old_mod = _generate(base, Path(tmp), "base")
        new_mod = _generate(new, Path(tmp), "new")
        try:
            return list(_cross_decode(base, new, old_mod, new_mod))
        finally:
            for mod in (old_mod, new_mod):
                sys.modules.pop(mod.__name__, None)


def _generate(spec: Spec, tmp: Path, tag: str) -> ModuleType:
    root = Path.cwd()
    content = next(o.content for o in render(spec, spec_name=spec.path, root=root) if o.path == STRUCTS_PATH)
    path = tmp / f"wire_verify_{tag}.py"
    path.write_text(content, encoding="utf-8")
    name = f"_wire_verify_{tag}_{id(spec)}"
    module_spec = importlib.util.spec_from_file_location(name, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    module_spec.loader.exec_module(module)
    return module


def _signature(s: Struct) -> tuple[object, ...]:
    """What of a struct reaches the wire (not its docs or lines)."""
    return (
        s.layout,
        tuple((f.name, str(f.type), f.optional, f.has_default, repr(f.default)) for f in s.fields),
    )


def _changed(base: Spec, new: Spec) -> list[str]:
    structs = [
        n for n, s in base.structs.items() if n in new.structs and _signature(s) != _signature(new.structs[n])
    ]
    enums = [n for n, e in base.enums.items() if n in new.enums and e.values != new.enums[n].values]
    return structs + enums


def _cross_decode(base: Spec, new: Spec, old_mod: ModuleType, new_mod: ModuleType) -> Any:
    enc = msgspec.msgpack.Encoder()
    for name in _changed(base, new):
        old_t, new_t = getattr(old_mod, name), getattr(new_mod, name)
        for direction, src, dst in (("old → new", old_t, new_t), ("new → old", new_t, old_t)):
            for sample_kind, value in _samples(src):
                try:
                    msgspec.msgpack.decode(enc.encode(value), type=dst)
                except (msgspec.ValidationError, msgspec.DecodeError) as exc:
                    yield Finding(
                        RULE, "error", name, f"{direction}: a {sample_kind} `{name}` fails to decode: {exc}"
                    )
                    break


def _samples(t: Any) -> list[tuple[str, Any]]:
    info = mi.type_info(t)
    if isinstance(info, mi.EnumType):
        return [(f"value {m.value!r} of", m) for m in t]
    assert isinstance(info, mi.StructType)
    return [("full", _sample(info, full=True)), ("minimal", _sample(info, full=False))]


def _sample(info: mi.Type, *, full: bool) -> Any:
    if isinstance(info, mi.StructType):
        if info.cls.__name__ == "Tensor":
            return cast(Any, info.cls).from_bytes("float32", [1], b"\0\0\0\0")
        kwargs = {f.name: _sample(f.type, full=full) for f in info.fields if full or f.required}
        return info.cls(**kwargs)
    simple: dict[type[mi.Type], Any] = {
        mi.BoolType: True,
        mi.IntType: 7,
        mi.FloatType: 1.5,
        mi.StrType: "s",
        mi.BytesType: b"b",
        mi.AnyType: {"k": [1, "v"]},
        mi.NoneType: None,
    }
    if type(info) in simple:
        return simple[type(info)]
    if isinstance(info, mi.ExtType):
        return msgspec.msgpack.Ext(3, b"\0\0\0\0")
    if isinstance(info, mi.ListType):
        return [_sample(info.item_type, full=full)]
    if isinstance(info, mi.DictType):
        return {_sample(info.key_type, full=full): _sample(info.value_type, full=full)}
    if isinstance(info, mi.EnumType):
        return next(iter(info.cls))
    if isinstance(info, mi.UnionType):
        member = next(t for t in info.types if not isinstance(t, mi.NoneType))
        return _sample(member, full=full)
    raise TypeError(f"no sample for {info!r}")
