"""The packages import downward only (DESIGN.md, "Layout"), and no module imports itself back through
others: every `import` in every module, also the ones inside functions (not those only for type
checkers, under `if TYPE_CHECKING:`), is read with ast."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parent.parent
# package -> the packages of ours it may import
ALLOWED = {
    "config": set(),
    "protocol": set(),
    "p4target": set(),  # a P4 target, usable on its own
    "hosts": {"config", "protocol"},
    "controller": {"config", "protocol", "p4target"},
    "testbed": {"config", "protocol", "p4target", "hosts", "controller"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _typing_only(tree: ast.Module) -> set[int]:
    """ids of the nodes inside `if TYPE_CHECKING:` blocks: annotations, not imports that run."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            out |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return out


def imports(path: Path) -> set[str]:
    """The modules of ours `path` imports when it runs (absolute names; relative imports resolved)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    tree = ast.parse(path.read_text(), str(path))
    skip = _typing_only(tree)
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            out |= {f"{base}.{a.name}" for a in node.names} | {base}
    return {m for m in out if m.split(".")[0] in ALLOWED}


def graph() -> nx.DiGraph:
    modules = {module_name(p): p for pkg in ALLOWED for p in (REPO / pkg).rglob("*.py")}
    g = nx.DiGraph()
    for name, path in modules.items():
        g.add_node(name)
        for target in imports(path):
            while target not in modules and "." in target:  # `from pkg import name` of a function, not a module
                target = target.rpartition(".")[0]
            if target in modules and target != name:
                g.add_edge(name, target)
    return g


def test_packages_import_downward_only():
    wrong = sorted(f"{a} imports {b}" for a, b in graph().edges
                   if b.split(".")[0] != a.split(".")[0] and b.split(".")[0] not in ALLOWED[a.split(".")[0]])
    assert wrong == []


def test_no_module_imports_itself_back():
    g = graph()
    # a package's __init__ re-exporting its modules is not a cycle of design
    g.remove_edges_from([(a, b) for a, b in list(g.edges) if b.startswith(a + ".")])
    cycles = sorted(" -> ".join(c + [c[0]]) for c in nx.simple_cycles(g))
    assert cycles == []


def test_no_test_imports_a_script():
    """scripts/ are command lines; what a test runs lives in a package or in tests/ (the fuzzers' harnesses)."""
    scripts = {p.stem for p in (REPO / "scripts").glob("*.py")}
    wrong = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        wrong += [f"{path.relative_to(REPO)} imports scripts/{name}.py" for name in sorted(names & scripts)]
    assert wrong == []
