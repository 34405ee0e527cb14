"""The dependency rules of docs/architecture.md, read from the source (tests/import_graph.py).

An import inside a function counts: it runs when the function does, so a cycle or a wrong
direction hidden there is still one.
"""

from __future__ import annotations

import ast
from pathlib import Path

from import_graph import import_cycles, imported_names, project_import_graph, project_modules


def _importers_of(target: str, *, among: str) -> list[str]:
    """Modules of package ``among`` that import ``target`` or something inside it."""
    return sorted(
        name
        for name, path in project_modules().items()
        if (name == among or name.startswith(f"{among}."))
        and any(imported == target or imported.startswith(f"{target}.") for imported in imported_names(path))
    )


def test_no_project_modules_import_each_other_in_a_cycle():
    assert import_cycles(project_import_graph()) == []


def test_plain_worker_functions_import_no_celery_task():
    # Tasks are shells that call plain functions; a plain function that queued a task through
    # workers.tasks would close a cycle through its own shell.
    assert _importers_of("workers.tasks", among="workers") == []


def test_the_web_side_never_runs_a_sync_itself():
    # A sync runs on a worker (workers.tasks.sync_checkpoint), holding the checkpoint's lease.
    assert _importers_of("workers.sync", among="dashboards") == []
    assert _importers_of("workers.sync", among="ckptweb") == []


def test_the_web_side_sends_tasks_by_name_and_never_imports_them():
    # One way to queue work from the web side: dashboards.queueing with a name of
    # dashboards.task_names, looked up in the Celery app's registry.
    assert _importers_of("workers.tasks", among="dashboards") == []
    assert _importers_of("workers.tasks", among="ckptweb") == []


# A task shell turns ids into one call of a plain function, and may queue the follow-up tasks that
# call returned; anything longer is logic that belongs in the plain function, where it can be
# tested without Celery.
MOST_STATEMENTS_IN_A_TASK_SHELL = 4


def _statements(body: list[ast.stmt]) -> int:
    """Statements in ``body``, counting those nested in loops and ifs, without the docstring."""
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return sum(1 + _statements(getattr(node, "body", [])) + _statements(getattr(node, "orelse", [])) for node in body)


def _task_shells(path: Path) -> dict[str, int]:
    """Each function decorated with ``shared_task`` in ``path`` -> its statement count."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {
        node.name: _statements(node.body)
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("shared_task" in ast.unparse(decorator) for decorator in node.decorator_list)
    }


def test_celery_tasks_are_thin_shells_over_plain_functions():
    shells = _task_shells(project_modules()["workers.tasks"])
    assert shells, "no shared_task found in workers/tasks.py"
    assert {name: count for name, count in shells.items() if count > MOST_STATEMENTS_IN_A_TASK_SHELL} == {}
