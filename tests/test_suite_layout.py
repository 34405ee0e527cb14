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
    return {line.split("::")[0] for line in result.stdout.splitlines() if "::" in line}


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
