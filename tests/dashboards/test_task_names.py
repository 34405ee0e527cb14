"""The names the web side sends tasks by are the names the workers register them under."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ckptweb.celery import app
from dashboards.task_names import SENT_FROM_THE_WEB

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", SENT_FROM_THE_WEB)
def test_every_task_the_web_side_sends_is_registered_under_that_name(name):
    import workers.tasks

    registered = {task.name for task in vars(workers.tasks).values() if hasattr(task, "apply_async")}
    assert name in registered
    assert app.tasks[name].name == name


def test_a_web_process_that_never_imported_the_tasks_finds_them_on_its_first_send():
    # In the test process some other test may have imported workers.tasks already; a new
    # interpreter is a web process as it starts.
    script = (
        "import sys, django; django.setup()\n"
        "from dashboards.queueing import _registered_task\n"
        "from dashboards.task_names import SENT_FROM_THE_WEB\n"
        "assert 'workers.tasks' not in sys.modules, 'imported before the first send'\n"
        "print(' '.join(_registered_task(name).name for name in SENT_FROM_THE_WEB))\n"
    )
    found = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPOSITORY)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == list(SENT_FROM_THE_WEB)
