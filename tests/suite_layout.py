"""Which markers a collected test gets from where it lives and what it asks for (tests/conftest.py).

The CI legs select by these markers (docs/testing.md): `make test` runs everything on PostgreSQL and
Redis; `make test-sqlite` runs again, on SQLite, only the tests that use the database. Markers that a
whole folder needs are given by path here, so a new file in that folder cannot miss them; `database`
is read off the test itself, so a new test that uses the database is in both legs without anyone
remembering to mark it.

`make test` runs the tests on two pytest-xdist workers (docs/testing.md): a test whose file shares a
fixture between its tests (module, class or package scope: a streaming query's history, a
collectstatic) gets an `xdist_group` named after its file, so that `--dist loadgroup` gives the whole
file to one worker and the fixture runs once; every other test goes to whichever worker is free.
"""

from __future__ import annotations

import inspect
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
# Fixture scopes whose value the tests of one file share: each worker would build it again.
SHARED_FIXTURE_SCOPES = frozenset({"module", "class", "package"})


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


def shares_a_fixture_with_its_file(item: pytest.Item) -> bool:
    """Whether the test uses a fixture of the suite's own that lives longer than one test and
    shorter than the run (plugins' are left out: pytest-django's class-scoped one is everyone's)."""
    info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the test's fixtures
    definitions = [defs[-1] for defs in info.name2fixturedefs.values() if defs] if info is not None else []
    return any(
        definition.scope in SHARED_FIXTURE_SCOPES and Path(inspect.getfile(definition.func)).is_relative_to(TESTS_DIR)
        for definition in definitions
    )


def group_files_that_share_fixtures(items: list[pytest.Item]) -> None:
    """Give every test of a file where one test uses a shared fixture the file's xdist group.

    The whole file, not only the tests that name the fixture: a test may ask for it at run time
    (``request.getfixturevalue``, as tests/spark/test_fixture_regeneration.py's ``tree`` does).
    """
    sharing = {item.path for item in items if shares_a_fixture_with_its_file(item)}
    for item in items:
        if item.path in sharing and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(_file_name(item.path)))


def put_xdist_groups_into_node_ids(items: list[pytest.Item]) -> None:
    """Make the node ids end in the ``@group`` that ``--dist loadgroup`` schedules by.

    pytest-xdist 3.8 (on each worker, in its own pytest_collection_modifyitems) writes the id with the
    group into ``item._nodeid``; since pytest 9.2 ``item.nodeid`` is read from ``item._id`` instead, so
    the suffix was lost and every test was scheduled on its own: a file's module fixture was set up on
    both workers at once (pytest-dev/pytest-xdist#1386). A no-op where the two agree: older pytest, or
    an xdist that writes ``_id`` itself, or a run without loadgroup.
    """
    for item in items:
        with_group = getattr(item, "_nodeid", None)
        if isinstance(with_group, str) and with_group != item.nodeid and hasattr(item, "_id"):
            item._id = type(item._id).parse(with_group)


def _file_name(path: Path) -> str:
    """``tests/spark/test_x.py`` for a file of the suite, the whole path for any other."""
    resolved = path.resolve()
    return resolved.relative_to(TESTS_DIR.parent).as_posix() if resolved.is_relative_to(TESTS_DIR) else str(resolved)


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
