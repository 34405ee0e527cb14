"""Which markers a collected test gets from where it lives and what it asks for (tests/conftest.py).

The CI legs select by these markers (docs/testing.md): `make test` runs everything on PostgreSQL and
Redis; `make test-sqlite` runs again, on SQLite, only the tests that use the database. Markers that a
whole folder needs are given by path here, so a new file in that folder cannot miss them; `database`
is read off the test itself, so a new test that uses the database is in both legs without anyone
remembering to mark it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS_DIR = Path(__file__).resolve().parent

# Folder (relative to tests/) -> the marker every test in it gets.
FOLDER_MARKERS = {
    ("workers", "checkpoint"): "library",
    ("spark",): "spark",
    ("ui",): "browser",
    ("s3",): "s3",
    ("prometheus",): "prometheus",
}
# pytest-django lets a test reach the database only through its django_db marker or one of these
# fixtures (live_server brings transactional_db with it); anything else is refused at run time.
DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback", "live_server"}
)
# Per-test time limits (pytest-timeout), in seconds: pytest.ini's default for most tests; more where
# a marker means real Spark (a module fixture may run several streaming queries in the first test).
TIMEOUT_SECONDS_BY_MARKER = {"spark": 1800}


def folder_markers(path: Path) -> list[str]:
    """The markers of the folders ``path`` lies in."""
    if not path.resolve().is_relative_to(TESTS_DIR):
        return []
    parts = path.resolve().relative_to(TESTS_DIR).parts
    return [marker for folder, marker in FOLDER_MARKERS.items() if parts[: len(folder)] == folder]


def uses_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


def assign_markers(item: pytest.Item) -> None:
    """Add the folder markers, `database`, and a larger timeout where a marker needs one."""
    for marker in folder_markers(item.path):
        item.add_marker(marker)
    if uses_database(item):
        if item.get_closest_marker("library"):
            raise pytest.UsageError(
                f"{item.nodeid} uses the database, but tests/workers/checkpoint/ holds the Django-free "
                "library's tests, which run in one leg only: move it beside the code it tests"
            )
        item.add_marker("database")
    if item.get_closest_marker("timeout") is None:
        limits = [seconds for marker, seconds in TIMEOUT_SECONDS_BY_MARKER.items() if item.get_closest_marker(marker)]
        if limits:
            item.add_marker(pytest.mark.timeout(max(limits)))
