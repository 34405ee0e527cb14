"""Run by tests/test_suite_layout.py under `-n 2 --dist loadgroup`, never by the suite itself (its name
is not test_*.py): a file shaped like tests/spark/test_fixture_regeneration.py, one test naming the
module fixture and the others asking for it at run time, so its tests get one xdist group."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def setting_up_worker() -> str:
    return os.environ.get("PYTEST_XDIST_WORKER", "")


@pytest.fixture(params=["without", "with"])
def maybe_shared(request) -> str:
    return request.getfixturevalue("setting_up_worker") if request.param == "with" else ""


def test_names_the_module_fixture(setting_up_worker):
    assert setting_up_worker


@pytest.mark.parametrize("n", range(6))
def test_asks_for_it_at_run_time(maybe_shared, n):
    assert maybe_shared in {"", os.environ.get("PYTEST_XDIST_WORKER")}
