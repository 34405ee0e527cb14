"""The CI legs select tests by the markers of tests/suite_layout.py: every test folder is accounted for,
and the SQLite leg's expression in the Makefile picks the tests that use the database and no others."""

from __future__ import annotations

import re
import subprocess
import sys

from fixture_paths import REPO_DIR
from suite_layout import FOLDER_MARKERS, TESTS_DIR, folder_markers

# Folders whose tests need no one service: each test says what it needs (django_db, worker, spark).
MIXED_FOLDERS = {(), ("dashboards",), ("workers",), ("pipelines",)}


def test_every_folder_with_tests_has_its_marker_or_is_known_to_mix():
    folders = {path.parent.relative_to(TESTS_DIR).parts for path in TESTS_DIR.rglob("test_*.py")}
    unknown = {
        folder
        for folder in folders
        if folder not in MIXED_FOLDERS and not any(folder[: len(marked)] == marked for marked in FOLDER_MARKERS)
    }
    assert unknown == set(), "give the folder a marker in tests/suite_layout.py, or add it to MIXED_FOLDERS"


def test_a_folder_marker_reaches_the_files_of_its_subfolders_and_no_others():
    assert folder_markers(TESTS_DIR / "workers" / "checkpoint" / "test_layout.py") == ["library"]
    assert folder_markers(TESTS_DIR / "spark" / "test_rocksdb_vs_spark.py") == ["spark"]
    assert folder_markers(TESTS_DIR / "workers" / "test_sync.py") == []
    assert folder_markers(REPO_DIR / "bench" / "state_rows.py") == []


def _sqlite_leg_markers() -> str:
    return re.search(r"^SQLITE_LEG_MARKERS := (.+)$", (REPO_DIR / "Makefile").read_text(), re.MULTILINE).group(1)


def _collected(marker_expression: str, *paths: str) -> set[str]:
    return {node_id.split("::")[0] for node_id in _collected_ids(marker_expression, *paths)}


def _collected_ids(marker_expression: str, *paths: str) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
        "-m",
        marker_expression,
        *paths,
    ]
    result = subprocess.run(command, cwd=REPO_DIR, capture_output=True, text=True, timeout=300)
    assert result.returncode in (0, 5), result.stdout + result.stderr  # 5: nothing selected
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_sqlite_leg_selects_the_tests_that_use_the_database_and_leaves_the_library_and_spark():
    files = {
        "tests/dashboards/test_views.py",  # django_db on the module
        "tests/dashboards/test_templatetags.py",  # pure functions
        "tests/workers/checkpoint/test_layout.py",  # the Django-free library
        "tests/spark/test_listener_to_ckptweb.py",  # Spark with the database: the PostgreSQL leg only
        "tests/ui/test_timeline_page.py",  # live_server
    }
    assert _collected(_sqlite_leg_markers(), *sorted(files)) == {
        "tests/dashboards/test_views.py",
        "tests/ui/test_timeline_page.py",
    }


def test_every_test_of_a_file_that_shares_a_fixture_goes_to_one_xdist_worker_and_no_other_file_is_held():
    regeneration = "tests/spark/test_fixture_regeneration.py"  # `tree` asks for the module's fixture at run time
    every_test = _collected_ids("", regeneration)
    assert _collected_ids("xdist_group", regeneration, "tests/dashboards/test_views.py") == every_test


def test_under_loadgroup_the_tests_of_a_file_that_shares_a_fixture_run_on_one_worker(tmp_path):
    # pytest 9.2 with pytest-xdist 3.8 lost the group (suite_layout.put_xdist_groups_into_node_ids).
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup"]
    command += ["--basetemp", str(tmp_path / "basetemp"), "tests/xdist_group_probe.py"]
    result = subprocess.run(command, cwd=REPO_DIR, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    ran_on = re.findall(r"^\[(gw\d+)\] .*PASSED tests/xdist_group_probe\.py::(\S+)\s*$", result.stdout, re.MULTILINE)
    assert len(ran_on) == 13, result.stdout
    assert {worker for worker, _ in ran_on} in ({"gw0"}, {"gw1"}), result.stdout
    assert all(test.endswith("@tests/xdist_group_probe.py") for _, test in ran_on), result.stdout
