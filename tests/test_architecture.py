"""The dependency rules of docs/architecture.md, checked on the import graph built from the source.

Every `import` and `from ... import` of a module counts, wherever it stands (module level, inside a
function, under `TYPE_CHECKING`): a lazy import still ties the modules together, and a cycle through
one is a cycle. `from pkg import name` depends on `pkg.name` when that is a module, else on `pkg`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ("vllm_llm", "vllm_remote_llm", "vllm_server")
#: Packages the runtime never imports: the benchmark harness and the test harness.
TOOLING = ("vllm_frontend_bench", "vllm_frontend_testing")

Graph = Mapping[str, frozenset[str]]


def source_roots() -> list[Path]:
    """The `src` directories of the codegen and every workspace package."""
    return [ROOT / "codegen" / "src", *sorted(ROOT.glob("packages/*/src"))]


def project_modules() -> dict[str, Path]:
    """Every project module by dotted name (a package by its `__init__`)."""
    modules: dict[str, Path] = {}
    for root in source_roots():
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _base(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module a `from` import names (relative imports resolved against `module`)."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if _is_package(path) else module.split(".")[:-1]
    anchor = package[: len(package) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _owner(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest project module that `name` is or lies inside (None: not a project module)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def _nodes(tree: ast.AST, *, eager_only: bool) -> Iterator[ast.AST]:
    """The nodes of `tree`; with `eager_only`, none inside a function body (what runs on import)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if not (eager_only and isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)):
                stack.append(child)


def imports_of(
    module: str, path: Path, modules: Mapping[str, Path], *, eager_only: bool = False
) -> Iterator[str]:
    """The project modules `module` imports: anywhere in its source, or only outside functions."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in _nodes(tree, eager_only=eager_only):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _base(module, path, node)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for name in names:
            owner = _owner(name, modules)
            if owner is not None and owner != module:
                yield owner


def import_graph() -> dict[str, frozenset[str]]:
    """Each project module and the project modules it imports."""
    modules = project_modules()
    return {m: frozenset(imports_of(m, p, modules)) for m, p in modules.items()}


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle as a path `[a, b, ..., a]`, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in sorted(graph):
        if start in state:
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


#: (importers, imported): packages of the first group never import packages of the second.
FORBIDDEN: tuple[tuple[frozenset[str], frozenset[str]], ...] = (
    (frozenset({"vllm_llm", "vllm_remote_llm"}), frozenset({"vllm_server"})),  # nothing imports the server
    (frozenset({"vllm_llm"}), frozenset({"vllm_remote_llm"})),  # server -> remote_llm -> llm
    (frozenset(RUNTIME), frozenset(TOOLING)),  # a router installs and runs without bench or test code
)


#: (importer, imported package): allowed only inside a function, so that it runs only when needed.
#: `serve --mock` without `--tokenizer` serves the tiny model's tokenizer, built by the test harness;
#: a server installed without that harness still starts (and says to pass --tokenizer).
LAZY_ONLY = frozenset({("vllm_server.cli", "vllm_frontend_testing")})


def forbidden_imports(graph: Graph) -> list[str]:
    """Every import that breaks the dependency direction, as `importer -> imported`."""
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            pair = (module.split(".")[0], target.split(".")[0])
            if (module, pair[1]) in LAZY_ONLY:
                continue  # checked by test_allowed_imports_of_tooling_are_lazy
            if any(pair[0] in importers and pair[1] in banned for importers, banned in FORBIDDEN):
                found.append(f"{module} -> {target}")
    return found


#: The layers inside `vllm_llm` (importer, imported): a module inside the first never imports one inside
#: the second. chat -> text -> the boundary at the top; engine_core -> the boundary; neither text nor
#: engine_core knows the other.
LAYERS_FORBIDDEN: tuple[tuple[str, str], ...] = (
    ("vllm_llm.text", "vllm_llm.chat"),
    ("vllm_llm.text", "vllm_llm.engine_core"),
    ("vllm_llm.engine_core", "vllm_llm.text"),
    ("vllm_llm.engine_core", "vllm_llm.chat"),
)

#: What `vllm_llm.parsers` may import of `vllm_llm` besides itself: the tokenizer interface, the errors,
#: the wire types.
PARSERS_MAY_IMPORT = ("vllm_llm.parsers", "vllm_llm.text._tokenizer", "vllm_llm._errors", "vllm_llm.wire")

#: Third-party packages that only `vllm_llm.engine_core` imports in `vllm_llm` (lazily, see
#: test_router_process.py): a router installs and runs without them.
ENGINE_ONLY = frozenset({"vllm", "torch"})


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_violations(graph: Graph) -> list[str]:
    """Every import inside `vllm_llm` that breaks its layers, as `importer -> imported`."""
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            crosses = any(_inside(module, a) and _inside(target, b) for a, b in LAYERS_FORBIDDEN)
            parser_reach = (
                _inside(module, "vllm_llm.parsers")
                and _inside(target, "vllm_llm")
                and not any(_inside(target, allowed) for allowed in PARSERS_MAY_IMPORT)
            )
            if crosses or parser_reach:
                found.append(f"{module} -> {target}")
    return found


def third_party_imports(path: Path) -> Iterator[str]:
    """The top-level names of every absolute import in the source at `path`, wherever it stands."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def engine_only_violations(imports: Mapping[str, frozenset[str]]) -> list[str]:
    """Every module of `vllm_llm` outside `engine_core` that imports vllm or torch, as `module -> package`."""
    return [
        f"{module} -> {package}"
        for module, names in sorted(imports.items())
        if _inside(module, "vllm_llm") and not _inside(module, "vllm_llm.engine_core")
        for package in sorted(names & ENGINE_ONLY)
    ]


def test_the_graph_sees_the_packages_and_their_lazy_imports() -> None:
    graph = import_graph()
    assert {"wire_codegen", "vllm_llm", "vllm_remote_llm", "vllm_server"} <= set(graph)
    # module level, relative-free `from pkg.sub import x`: depends on the submodule, not the package
    assert "vllm_llm._interface" in graph["vllm_llm.mock"]
    assert "vllm_llm" not in graph["vllm_llm.mock"]
    # inside a function (EngineCoreLlm imports its vLLM-facing modules lazily)
    assert "vllm_llm.engine_core._lowering" in graph["vllm_llm.engine_core._llm"]
    # the facade re-exports its submodules
    assert "vllm_llm.engine_core" in graph["vllm_llm"]


def test_find_cycle_reports_the_path() -> None:
    graph = {"a": frozenset({"b"}), "b": frozenset({"c"}), "c": frozenset({"a"}), "d": frozenset({"a"})}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": frozenset({"b"}), "b": frozenset(), "c": frozenset({"a", "b"})}) is None


def test_relative_imports_resolve_and_name_submodules() -> None:
    modules = {"p": Path("p/__init__.py"), "p.a": Path("p/a.py"), "p.b": Path("p/b.py")}
    tree = ast.parse("from . import b\nfrom .b import thing\nfrom p import a\n")
    nodes = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert [_base("p.a", modules["p.a"], n) for n in nodes] == ["p", "p.b", "p"]
    assert [_base("p", modules["p"], n) for n in nodes[:2]] == ["p", "p.b"]


def test_forbidden_imports_name_the_importer_and_the_imported() -> None:
    graph = {
        "vllm_llm.text": frozenset({"vllm_server.errors", "vllm_llm.wire"}),
        "vllm_server.cli": frozenset({"vllm_frontend_bench.cli", "vllm_remote_llm", "vllm_llm"}),
        "vllm_frontend_bench.cli": frozenset({"vllm_server.cli"}),
    }
    assert forbidden_imports(graph) == [
        "vllm_llm.text -> vllm_server.errors",
        "vllm_server.cli -> vllm_frontend_bench.cli",
    ]


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_dependency_direction() -> None:
    # server -> remote_llm -> llm; nothing below the server imports it; the runtime never imports the
    # benchmark or test harness (a router installs without them)
    assert forbidden_imports(import_graph()) == []


def test_allowed_imports_of_tooling_are_lazy() -> None:
    modules = project_modules()
    for module, package in sorted(LAZY_ONLY):
        eager = set(imports_of(module, modules[module], modules, eager_only=True))
        assert not {m for m in eager if m.split(".")[0] == package}, f"{module} imports {package} on import"


def test_eager_imports_leave_out_function_bodies() -> None:
    tree = ast.parse("import p.a\ndef f():\n    import p.b\n")
    eager = [n for n in _nodes(tree, eager_only=True) if isinstance(n, ast.Import)]
    every = [n for n in _nodes(tree, eager_only=False) if isinstance(n, ast.Import)]
    assert [a.name for n in eager for a in n.names] == ["p.a"]
    assert sorted(a.name for n in every for a in n.names) == ["p.a", "p.b"]


def test_layer_rules_name_the_importer_and_the_imported() -> None:
    graph = {
        "vllm_llm.text._lowering": frozenset({"vllm_llm.chat._template", "vllm_llm.wire"}),
        "vllm_llm.engine_core._llm": frozenset({"vllm_llm.text", "vllm_llm._interface"}),
        "vllm_llm.chat._llm": frozenset({"vllm_llm.text", "vllm_llm.parsers"}),
        "vllm_llm.parsers.tool.hermes": frozenset({"vllm_llm.text._tokenizer", "vllm_llm.text._llm"}),
        "vllm_llm.parsers._base": frozenset({"vllm_llm._errors", "vllm_llm.wire._structs", "vllm_llm"}),
    }
    assert layer_violations(graph) == [
        "vllm_llm.engine_core._llm -> vllm_llm.text",
        "vllm_llm.parsers._base -> vllm_llm",
        "vllm_llm.parsers.tool.hermes -> vllm_llm.text._llm",
        "vllm_llm.text._lowering -> vllm_llm.chat._template",
    ]
    imports = {
        "vllm_llm.engine_core._tensors": frozenset({"torch", "msgspec"}),
        "vllm_llm.text._tokenizer": frozenset({"tokenizers", "vllm"}),
        "vllm_server.engine_flags": frozenset({"vllm"}),
    }
    assert engine_only_violations(imports) == ["vllm_llm.text._tokenizer -> vllm"]


def test_the_layers_of_vllm_llm() -> None:
    # text and engine_core never import each other nor chat; the parsers import only the tokenizer
    # interface, the errors and the wire
    assert layer_violations(import_graph()) == []


def test_only_engine_core_imports_vllm_or_torch() -> None:
    modules = project_modules()
    imports = {m: frozenset(third_party_imports(p)) for m, p in modules.items()}
    assert imports["vllm_llm.engine_core._lowering"] >= ENGINE_ONLY  # the check sees lazy imports
    assert engine_only_violations(imports) == []
