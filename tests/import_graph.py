"""The project's imports read from its source with `ast`, for the boundary tests (docs/architecture.md).

Every import statement counts, also one inside a function (it runs when the function does, and a
cycle hidden there is still a cycle), except those under `if TYPE_CHECKING:`, which never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("ckptweb", "dashboards", "workers", "pipelines")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the project's packages."""
    return {
        module_name(path): path for package in PROJECT_PACKAGES for path in sorted((REPO_ROOT / package).rglob("*.py"))
    }


def imported_names(path: Path) -> Iterator[str]:
    """The dotted names one file imports: a module, or ``module.name`` for ``from module import name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = ".".join(parts[: len(parts) - node.level + 1])
    return f"{base}.{node.module}" if node.module else base


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node, but none under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (child for statement in node.orelse for child in _walk_runtime(statement))
            continue
        yield from _walk_runtime(node)


def _walk_runtime(node: ast.AST) -> Iterator[ast.AST]:
    yield node
    yield from _runtime_nodes(node)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def project_import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports (``from package import module`` names the module)."""
    modules = project_modules()
    return {
        name: {imported for imported in imported_names(path) if imported in modules and imported != name}
        for name, path in modules.items()
    }


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = lowlink[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in index:
                visit(imported)
                lowlink[module] = min(lowlink[module], lowlink[imported])
            elif imported in on_stack:
                lowlink[module] = min(lowlink[module], index[imported])
        if lowlink[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles
