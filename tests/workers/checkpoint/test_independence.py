"""The checkpoint library stays Django-free and keeps fsspec behind its storage package (house style B3)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from import_graph import imported_names

REPO_ROOT = Path(__file__).resolve().parents[3]
LIBRARY = REPO_ROOT / "workers" / "checkpoint"
FORBIDDEN_TOP_LEVEL = ("django", "celery", "redis", "plotly")


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_importing_every_module_of_the_library_loads_no_django_celery_redis_or_plotly():
    names = [_module_name(path) for path in _library_modules()]
    code = (
        f"import importlib, sys\nfor name in {names!r}: importlib.import_module(name)\n"
        f"print(sorted(name for name in sys.modules if name.split('.')[0] in {FORBIDDEN_TOP_LEVEL!r}))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("package", sorted(LIBRARY.rglob("__init__.py")), ids=lambda path: str(path.parent.name))
def test_a_package_of_the_library_is_a_docstring_and_imports_nothing(package):
    # No front door: a name is imported from the module that holds it (docs/architecture.md), so
    # importing one parser does not load every module of the library with RocksDB and numpy.
    tree = ast.parse(package.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{package} says what its package holds"
    assert [type(node).__name__ for node in tree.body[1:]] == []


def test_importing_one_parser_loads_neither_rocksdb_nor_numpy():
    code = "import sys, workers.checkpoint.offsets\nprint(sorted({'rocksdict', 'numpy'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def _library_modules() -> list[Path]:
    modules = sorted(LIBRARY.rglob("*.py"))
    assert modules, f"no modules found under {LIBRARY}"
    return modules


@pytest.mark.parametrize("module", _library_modules(), ids=lambda path: path.name)
def test_only_the_storage_package_imports_fsspec(module):
    imports_fsspec = any(name.split(".")[0] == "fsspec" for name in imported_names(module))
    assert not imports_fsspec or module.parent == LIBRARY / "storage"


@pytest.mark.parametrize("module", _library_modules(), ids=lambda path: path.name)
def test_no_module_imports_a_web_stack_package_or_unsafe_deserialiser(module):
    text = module.read_text(encoding="utf-8")
    pattern = r"^\s*(?:import|from)\s+(django|celery|redis|plotly|pickle|marshal|shelve)\b"
    assert re.findall(pattern, text, flags=re.MULTILINE) == []
    assert "literal_eval" not in text
    assert re.search(r"(?<![\w.])eval\(", text) is None


def _outside_the_library(imported: str) -> bool:
    top = imported.split(".")[0]
    if top in ("django", "dashboards", "ckptweb", "pipelines", "bench"):
        return True
    return top == "workers" and not (imported == "workers.checkpoint" or imported.startswith("workers.checkpoint."))


@pytest.mark.parametrize("module", _library_modules(), ids=lambda path: path.name)
def test_no_module_imports_django_or_the_project_outside_the_library(module):
    # Also inside a function: the library must stay usable without the web app or the workers.
    assert sorted({name for name in imported_names(module) if _outside_the_library(name)}) == []
