"""Load a spec file and validate it, with errors that name the file, the line and the problem."""

from __future__ import annotations

import hashlib
import keyword
import re
from pathlib import Path
from typing import Any, cast, get_args

import yaml

from wire_codegen.model import (
    BreakingChange,
    Enum,
    Field,
    Layout,
    Literal_,
    Method,
    Service,
    Spec,
    Streaming,
    Struct,
)
from wire_codegen.typeref import (
    DictOf,
    ListOf,
    Named,
    Prim,
    TypeRef,
    TypeSyntaxError,
    Union,
    named_refs,
    parse_type,
)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_TYPE_NAME = re.compile(r"[A-Z][A-Za-z0-9]*\Z")
_SERVICE_NAME = re.compile(r"[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*\.[A-Z][A-Za-z0-9]*\Z")
_RESERVED_FIELDS = frozenset({"self", "cls"})


class SpecError(Exception):
    """A spec that cannot be loaded: `file:line: problem`."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.message = message


def load_spec(path: str | Path, *, display_path: str | None = None) -> Spec:
    """Load and validate the spec at `path`."""
    p = Path(path)
    shown = display_path or str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(shown, 0, f"cannot read the spec: {exc.strerror}") from exc
    return load_spec_text(text, shown)


def load_spec_text(text: str, path: str) -> Spec:
    """Load and validate a spec from its text; `path` names it in errors."""
    return _Loader(text, path).spec()


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


class _Loader:
    def __init__(self, text: str, path: str) -> None:
        self.path = path
        self.sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()
        self.yaml = yaml.SafeLoader(text)
        try:
            node = self.yaml.get_single_node()
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = int(mark.line) + 1 if mark is not None else 0
            raise SpecError(path, line, f"invalid YAML: {exc.problem or exc}") from exc
        if node is None:
            raise SpecError(path, 1, "the spec is empty")
        self.root = node
        self.key_lines: dict[int, int] = {}

    # ---- node helpers ---------------------------------------------------------------------------

    def line(self, node: yaml.Node) -> int:
        """The line of `node`, or of its key when it is a mapping value."""
        return self.key_lines.get(id(node), _line(node))

    def fail(self, node: yaml.Node | int, message: str) -> SpecError:
        line = node if isinstance(node, int) else self.line(node)
        return SpecError(self.path, line, message)

    def mapping(self, node: yaml.Node, what: str) -> dict[str, yaml.Node]:
        if not isinstance(node, yaml.MappingNode):
            raise self.fail(node, f"{what} must be a mapping")
        out: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            key = self.value(key_node)
            if not isinstance(key, str):
                raise self.fail(key_node, f"keys of {what} must be strings, got {key!r}")
            if key in out:
                raise self.fail(key_node, f"duplicate key {key!r} in {what}")
            out[key] = value_node
            self.key_lines[id(value_node)] = _line(key_node)
        return out

    def sequence(self, node: yaml.Node, what: str) -> list[yaml.Node]:
        if not isinstance(node, yaml.SequenceNode):
            raise self.fail(node, f"{what} must be a list")
        return list(node.value)

    def value(self, node: yaml.Node) -> Any:
        return self.yaml.construct_object(node, deep=True)

    def string(self, node: yaml.Node, what: str) -> str:
        v = self.value(node)
        if not isinstance(v, str):
            raise self.fail(node, f"{what} must be a string, got {v!r}")
        return v

    def keys(
        self,
        m: dict[str, yaml.Node],
        node: yaml.Node,
        what: str,
        *,
        required: tuple[str, ...],
        allowed: tuple[str, ...],
    ) -> None:
        for k in required:
            if k not in m:
                raise self.fail(node, f"{what} is missing {k!r}")
        for k, v in m.items():
            if k not in required and k not in allowed:
                raise self.fail(v, f"unknown key {k!r} in {what}")

    # ---- the spec -------------------------------------------------------------------------------

    def spec(self) -> Spec:
        top = self.mapping(self.root, "the spec")
        self.keys(
            top,
            self.root,
            "the spec",
            required=("revision", "service"),
            allowed=("enums", "structs", "breaking"),
        )
        revision = self.value(top["revision"])
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
            raise self.fail(top["revision"], f"revision must be a positive integer, got {revision!r}")
        enums = self.enums(top["enums"]) if "enums" in top else {}
        structs = self.structs(top["structs"]) if "structs" in top else {}
        for name, s in structs.items():
            if name in enums:
                raise self.fail(s.line, f"duplicate type name {name!r}: both a struct and an enum")
        service = self.service(top["service"])
        breaking = self.breaking(top["breaking"]) if "breaking" in top else ()
        spec = Spec(self.path, self.sha256, revision, service, enums, structs, breaking)
        self.check_references(spec)
        return spec

    def enums(self, node: yaml.Node) -> dict[str, Enum]:
        out: dict[str, Enum] = {}
        for name, enode in self.mapping(node, "enums").items():
            self.type_name(name, enode)
            m = self.mapping(enode, f"enum {name}")
            self.keys(m, enode, f"enum {name}", required=("values",), allowed=("doc",))
            values: dict[str, int | str] = {}
            vnode = m["values"]
            for member, value_node in self.mapping(vnode, f"values of enum {name}").items():
                if not _IDENT.match(member) or keyword.iskeyword(member):
                    raise self.fail(value_node, f"enum {name}: {member!r} is not a valid member name")
                value = self.value(value_node)
                if isinstance(value, bool) or not isinstance(value, int | str):
                    raise self.fail(
                        value_node,
                        f"enum {name}: value of {member!r} must be int or str, got {value!r}",
                    )
                if value in values.values():
                    raise self.fail(value_node, f"enum {name}: duplicate value {value!r} for {member!r}")
                values[member] = value
            if not values:
                raise self.fail(vnode, f"enum {name} has no values")
            kinds = {type(v) for v in values.values()}
            if len(kinds) > 1:
                raise self.fail(vnode, f"enum {name}: values must be all int or all str, not a mix")
            out[name] = Enum(name, values, self.line(enode), self.doc(m))
        return out

    def structs(self, node: yaml.Node) -> dict[str, Struct]:
        out: dict[str, Struct] = {}
        for name, snode in self.mapping(node, "structs").items():
            self.type_name(name, snode)
            m = self.mapping(snode, f"struct {name}")
            self.keys(m, snode, f"struct {name}", required=("layout", "fields"), allowed=("doc",))
            layout = self.value(m["layout"])
            if layout not in get_args(Layout):
                raise self.fail(
                    m["layout"],
                    f"struct {name}: layout must be named or positional, got {layout!r}",
                )
            fields: list[Field] = []
            for fnode in self.sequence(m["fields"], f"fields of struct {name}"):
                f = self.field(name, fnode)
                if any(g.name == f.name for g in fields):
                    raise self.fail(fnode, f"struct {name}: duplicate field {f.name!r}")
                if layout == "positional" and f.required and fields and not fields[-1].required:
                    raise self.fail(
                        fnode,
                        f"struct {name}: required field {f.name!r} follows optional field "
                        f"{fields[-1].name!r}; in a positional struct optional fields come last",
                    )
                fields.append(f)
            out[name] = Struct(name, layout, tuple(fields), self.line(snode), self.doc(m))
        return out

    def field(self, struct: str, node: yaml.Node) -> Field:
        m = self.mapping(node, f"a field of struct {struct}")
        self.keys(
            m,
            node,
            f"a field of struct {struct}",
            required=("name", "type"),
            allowed=("doc", "optional", "default"),
        )
        name = self.string(m["name"], f"a field name of struct {struct}")
        if (
            not _IDENT.match(name)
            or keyword.iskeyword(name)
            or name.startswith("_")
            or name in _RESERVED_FIELDS
        ):
            raise self.fail(m["name"], f"struct {struct}: {name!r} is not a valid field name")
        type_text = self.value(m["type"])
        if not isinstance(type_text, str):
            raise self.fail(m["type"], f"field {struct}.{name}: type must be a string, got {type_text!r}")
        try:
            t = parse_type(type_text)
        except TypeSyntaxError as exc:
            raise self.fail(m["type"], f"field {struct}.{name}: {exc}") from exc
        optional = False
        if "optional" in m:
            optional = self.value(m["optional"])
            if not isinstance(optional, bool):
                raise self.fail(m["optional"], f"field {struct}.{name}: optional must be true or false")
        has_default = "default" in m
        default: Literal_ = self.value(m["default"]) if has_default else None
        if has_default and optional:
            raise self.fail(
                m["default"],
                f"field {struct}.{name}: a field is optional or has a default, not both",
            )
        if has_default and default is None:
            raise self.fail(m["default"], f"field {struct}.{name}: default null is spelled optional: true")
        return Field(name, t, _line(node), self.doc(m), optional, has_default, default)

    def service(self, node: yaml.Node) -> Service:
        m = self.mapping(node, "service")
        self.keys(m, node, "service", required=("name", "methods"), allowed=("doc",))
        name = self.string(m["name"], "the service name")
        if not _SERVICE_NAME.match(name):
            raise self.fail(m["name"], f"service name {name!r} must look like package.Service")
        methods: list[Method] = []
        for mnode in self.sequence(m["methods"], "methods"):
            mm = self.mapping(mnode, "a method")
            self.keys(
                mm,
                mnode,
                "a method",
                required=("name", "request", "response"),
                allowed=("streaming", "doc"),
            )
            mname = self.string(mm["name"], "a method name")
            if not _TYPE_NAME.match(mname):
                raise self.fail(mm["name"], f"method name {mname!r} must be CamelCase")
            if any(x.name == mname for x in methods):
                raise self.fail(mm["name"], f"duplicate method {mname!r}")
            streaming = self.value(mm["streaming"]) if "streaming" in mm else "unary"
            if streaming not in get_args(Streaming):
                raise self.fail(
                    mm["streaming"],
                    f"method {mname}: streaming must be unary, server or bidi, got {streaming!r}",
                )
            methods.append(
                Method(
                    mname,
                    self.string(mm["request"], f"request of {mname}"),
                    self.string(mm["response"], f"response of {mname}"),
                    cast(Streaming, streaming),
                    _line(mnode),
                    self.doc(mm),
                )
            )
        if not methods:
            raise self.fail(m["methods"], "the service has no methods")
        return Service(name, tuple(methods), self.line(node), self.doc(m))

    def breaking(self, node: yaml.Node) -> tuple[BreakingChange, ...]:
        out: list[BreakingChange] = []
        for bnode in self.sequence(node, "breaking"):
            m = self.mapping(bnode, "a breaking-change declaration")
            self.keys(
                m,
                bnode,
                "a breaking-change declaration",
                required=("revision", "rule", "path", "reason"),
                allowed=(),
            )
            rev = self.value(m["revision"])
            if not isinstance(rev, int) or isinstance(rev, bool):
                raise self.fail(m["revision"], "breaking: revision must be an integer")
            reason = self.string(m["reason"], "breaking: reason")
            if not reason.strip():
                raise self.fail(m["reason"], "breaking: the reason must say why")
            out.append(
                BreakingChange(
                    rev,
                    self.string(m["rule"], "breaking: rule"),
                    self.string(m["path"], "breaking: path"),
                    reason,
                    _line(bnode),
                )
            )
        return tuple(out)

    def doc(self, m: dict[str, yaml.Node]) -> str:
        if "doc" not in m:
            return ""
        return " ".join(self.string(m["doc"], "doc").split())

    def type_name(self, name: str, node: yaml.Node) -> None:
        if not _TYPE_NAME.match(name):
            raise self.fail(node, f"type name {name!r} must be CamelCase")

    # ---- cross references -----------------------------------------------------------------------

    def check_references(self, spec: Spec) -> None:
        known = set(spec.structs) | set(spec.enums)
        for s in spec.structs.values():
            for f in s.fields:
                for ref in named_refs(f.type):
                    if ref not in known:
                        raise self.fail(f.line, f"field {s.name}.{f.name}: unknown type {ref!r}")
                if f.has_default:
                    problem = _default_problem(f.type, f.default, spec)
                    if problem:
                        raise self.fail(
                            f.line, f"field {s.name}.{f.name}: bad default {f.default!r}: {problem}"
                        )
        for m in spec.service.methods:
            for role, ref in (("request", m.request), ("response", m.response)):
                if ref not in spec.structs:
                    what = "an enum" if ref in spec.enums else "unknown"
                    raise self.fail(
                        m.line,
                        f"method {m.name}: {role} type {ref!r} is {what}; it must be a struct",
                    )


def _default_problem(t: TypeRef, value: object, spec: Spec) -> str | None:
    if isinstance(t, Prim):
        ok = {
            "bool": isinstance(value, bool),
            "int": isinstance(value, int) and not isinstance(value, bool),
            "float": isinstance(value, int | float) and not isinstance(value, bool),
            "str": isinstance(value, str),
        }.get(t.name)
        if ok is None:
            return f"a {t.name} field cannot have a default"
        return None if ok else f"not a {t.name}"
    if isinstance(t, ListOf):
        return None if value == [] else "a list default must be []"
    if isinstance(t, DictOf):
        return None if value == {} else "a dict default must be {}"
    if isinstance(t, Union):
        return "a union field cannot have a default"
    assert isinstance(t, Named)
    if t.name in spec.enums:
        if value not in spec.enums[t.name].values:
            return f"not a member of enum {t.name}"
        return None
    return "a struct field cannot have a default"
