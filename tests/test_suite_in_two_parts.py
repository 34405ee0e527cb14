""".ci/suite-in-two-parts, which `make test` runs: the tests without Spark on TEST_WORKERS workers,
then the Spark tests in one process, a marker expression of the caller narrowing both, and the exit
status of the first part that failed. A stand-in for Python records each pytest call and exits
with the status the test gives each part."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "suite-in-two-parts"
STAND_IN = """#!/bin/bash
printf '%s\\n' "$*" >> "{calls}"
case "$*" in *"-m (spark)"*|*"-m spark"*|*"and (spark)"*) exit {spark} ;; *) exit {rest} ;; esac
"""


def _run(tmp_path: Path, *arguments: str, rest: int = 0, spark: int = 0) -> tuple[int, list[str]]:
    calls = tmp_path / "calls"
    python = tmp_path / "python"
    python.write_text(STAND_IN.format(calls=calls, rest=rest, spark=spark))
    python.chmod(0o755)
    environment = {"PATH": "/usr/bin:/bin", "TEST_WORKERS": "2", "SPARK_TEST_WORKERS": "0"}
    done = subprocess.run(["bash", str(SCRIPT), str(python), *arguments], env=environment, capture_output=True)
    return done.returncode, calls.read_text().splitlines()


def test_the_tests_without_spark_run_on_the_workers_then_spark_in_one_process(tmp_path):
    status, calls = _run(tmp_path, "-q", "--durations=30")

    assert status == 0
    assert calls == [
        "-m pytest -n 2 --dist loadgroup -m not spark -q --durations=30",
        "-m pytest -n 0 --dist loadgroup -m spark -q --durations=30",
    ]


@pytest.mark.parametrize("given", [["-m", "library and not slow"], ["-mlibrary and not slow"]])
def test_a_marker_expression_of_the_caller_narrows_both_parts_instead_of_replacing_theirs(tmp_path, given):
    _, calls = _run(tmp_path, *given, "tests/x.py")

    assert calls == [
        "-m pytest -n 2 --dist loadgroup -m (library and not slow) and (not spark) tests/x.py",
        "-m pytest -n 0 --dist loadgroup -m (library and not slow) and (spark) tests/x.py",
    ]


@pytest.mark.parametrize(
    ("rest", "spark", "expected"),
    [(0, 0, 0), (1, 0, 1), (0, 1, 1), (2, 1, 2), (5, 0, 0), (0, 5, 0), (5, 1, 1), (5, 5, 5)],
)
def test_both_parts_always_run_and_the_first_failure_is_the_status(tmp_path, rest, spark, expected):
    # pytest's 5 is "no tests collected": a pass when the other part ran tests.
    status, calls = _run(tmp_path, rest=rest, spark=spark)

    assert (status, len(calls)) == (expected, 2)
