"""The checkpoint library stays Django-free and keeps fsspec behind its storage package (house style B3)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from import_graph import imported_names

REPO_ROOT = Path(__file__).resolve().parents[3]
LIBRARY = REPO_ROOT / "workers" / "checkpoint"
FORBIDDEN_TOP_LEVEL = ("django", "celery", "redis", "plotly")


def test_importing_the_library_loads_no_django_celery_redis_or_plotly():
    code = (
        "import sys, workers.checkpoint\n"
        f"print(sorted(name for name in sys.modules if name.split('.')[0] in {FORBIDDEN_TOP_LEVEL!r}))"
    )
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
