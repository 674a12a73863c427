"""The package's imports, read from the source tree as installed (pyproject's package-dir:
solver/ is morello_asp.solver, codegen/ morello_asp.codegen): no import cycle between
modules, and a module imports the package's own modules at its top, not inside functions
(an import inside a function is for an optional or heavy third-party dependency only,
with a comment saying so). `make lint` checks the layers themselves with import-linter
(the contracts in pyproject.toml)."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {
    "morello_asp": "morello_asp",
    "solver": "morello_asp.solver",
    "codegen": "morello_asp.codegen",
    "encodings": "morello_asp.encodings",
}


def module_files() -> dict[str, Path]:
    out = {}
    for folder, pkg in PACKAGES.items():
        for p in (ROOT / folder).rglob("*.py"):
            parts = [pkg, *p.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = p
    return out


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(mod: str, path: Path, known: set[str]):
    """(imported module, line, inside a function without a comment) for each first-party
    import of `mod`, leaving out imports under `if TYPE_CHECKING:` (annotations only)."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    out = []

    def target(node) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        base = mod.split(".") if is_pkg else mod.split(".")[:-1]
        if node.level:
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        return [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in known else prefix for a in node.names]

    lines = path.read_text().splitlines()

    def visit(node, in_function: bool):
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                continue
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import | ast.ImportFrom):
                # an import inside a function with a comment saying why (an optional or
                # heavy dependency) is deliberate; one without is not
                explained = any("#" in ln for ln in lines[child.lineno - 1 : child.end_lineno])
                for t in target(child):
                    while t and t not in known:
                        t = t.rpartition(".")[0]
                    if t and t != mod:
                        out.append((t, child.lineno, in_function and not explained))
            visit(child, inner)

    visit(tree, False)
    return out


def graph() -> tuple[nx.DiGraph, list[str]]:
    files = module_files()
    known = set(files)
    g = nx.DiGraph()
    g.add_nodes_from(known)
    inner = []
    for mod, path in files.items():
        for t, line, in_function in imports(mod, path, known):
            g.add_edge(mod, t)
            if in_function:
                inner.append(f"{path.relative_to(ROOT)}:{line} imports {t}")
    return g, inner


def test_no_import_cycle_between_modules():
    g, _ = graph()
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert not cycles, "import cycles:\n" + "\n".join(", ".join(c) for c in cycles)


def test_the_package_is_imported_at_the_top_of_a_module():
    _, inner = graph()
    assert not inner, "imports of the package inside functions:\n" + "\n".join(inner)
