"""The layering of DESIGN.md for the host side: protocol below hosts and controller, the
controller free of host code, and no import cycle among the modules of hosts/."""
import ast
import graphlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "hosts", "controller", "testbed", "p4target")


def imports(path: Path) -> set[str]:
    """Every module `path` imports, at the top or inside functions, resolved to dotted names;
    `if __name__ == "__main__":` blocks are left out (they run only as a script)."""
    package = path.parent.name
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test):
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = f"{package}.{node.module}" if node.level else node.module
            if node.level and node.module is None:
                base = package
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def packages_used(package: str) -> dict[str, set[str]]:
    """module -> the AggNet packages it imports."""
    return {str(p.relative_to(ROOT)): {name.split(".")[0] for name in imports(p)} & set(PACKAGES)
            for p in sorted((ROOT / package).glob("*.py"))}


def test_protocol_and_controller_import_no_host_code():
    for module, used in packages_used("protocol").items():
        assert used <= {"protocol"}, module
    for module, used in packages_used("controller").items():
        assert "hosts" not in used and "testbed" not in used, module


def test_hosts_import_neither_controller_nor_testbed():
    for module, used in packages_used("hosts").items():
        assert used <= {"hosts", "protocol"}, module


def test_no_import_cycle_among_host_modules():
    modules = {p.stem for p in (ROOT / "hosts").glob("*.py")}
    graph = {}
    for p in (ROOT / "hosts").glob("*.py"):
        names = {n.split(".")[1] for n in imports(p) if n.startswith("hosts.")}
        graph[p.stem] = (names & modules) - {p.stem}
    graphlib.TopologicalSorter(graph).prepare()  # raises CycleError naming the cycle
