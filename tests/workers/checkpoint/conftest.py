"""Library-level fixtures for the checkpoint library's tests: no Django, no database.

The Spark-written fixtures are read in place from the shared folder (never copied into the
repository); tests that need to change a file work on a copy in ``tmp_path``.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import fsspec
import pytest

from fixture_paths import SPARK_TEST_RESOURCES

# Every metadata-log file among the fixtures, by kind. test_corrupt_inputs.py checks that these
# lists still match what is on disk, so a new fixture cannot be silently left out.
OFFSETS_FILES = (
    "checkpoint-test-offsetId-commitId-inconsistent/offsets/0",
    "checkpoint-test-offsetId-commitId-inconsistent/offsets/1",
    "checkpoint-test-offsetId-commitId-inconsistent/offsets/2",
    "checkpoint-test-offsetId-commitId-inconsistent/offsets/4",
    "checkpoint-version-2.1.0/offsets/0",
    "checkpoint-version-2.1.0/offsets/1",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1/offsets/0",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1/offsets/1",
    "checkpoint-version-2.4.0-streaming-join/offsets/0",
    "checkpoint-version-3.2.0-deduplication-with-repartition/offsets/0",
    "checkpoint-version-3.2.0-deduplication-with-repartition/offsets/1",
    "offset-log-version-2.1.0/0",
)
COMMITS_FILES = (
    "checkpoint-test-offsetId-commitId-inconsistent/commits/0",
    "checkpoint-test-offsetId-commitId-inconsistent/commits/1",
    "checkpoint-test-offsetId-commitId-inconsistent/commits/2",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1/commits/0",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1/commits/1",
    "checkpoint-version-2.4.0-streaming-join/commits/0",
    "checkpoint-version-3.2.0-deduplication-with-repartition/commits/0",
    "checkpoint-version-3.2.0-deduplication-with-repartition/commits/1",
)
METADATA_FILES = (
    "checkpoint-test-offsetId-commitId-inconsistent/metadata",
    "checkpoint-version-2.1.0/metadata",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1/metadata",
    "checkpoint-version-2.4.0-streaming-join/metadata",
    "checkpoint-version-3.2.0-deduplication-with-repartition/metadata",
    "query-metadata-logs-version-2.1.0.txt",
)
# Compactible logs (file source and file sink); their own parsers live elsewhere, but they
# share the "v1 + lines" framing that logfile.py reads.
COMPACTIBLE_LOG_FILES = (
    "file-sink-log-version-2.1.0/7.compact",
    "file-sink-log-version-2.1.0/8",
    "file-sink-log-version-2.1.0/9",
    "file-source-log-version-2.1.0/2.compact",
    "file-source-log-version-2.1.0/3",
    "file-source-log-version-2.1.0/4",
)
CHECKPOINT_DIRS = (
    "checkpoint-test-offsetId-commitId-inconsistent",
    "checkpoint-version-2.1.0",
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1",
    "checkpoint-version-2.4.0-streaming-join",
    "checkpoint-version-3.2.0-deduplication-with-repartition",
)

_KINDS = {"offsets": OFFSETS_FILES, "commits": COMMITS_FILES, "metadata": METADATA_FILES}
_CORPORA = {
    "offsets_file": OFFSETS_FILES,
    "commits_file": COMMITS_FILES,
    "metadata_file": METADATA_FILES,
    "compactible_log_file": COMPACTIBLE_LOG_FILES,
    "fixture_checkpoint": CHECKPOINT_DIRS,
    # (kind, relative path) pairs: every offsets, commits and metadata file ...
    "corpus_file": tuple((kind, path) for kind, paths in _KINDS.items() for path in paths),
    # ... and only the offsets and commits files.
    "log_corpus_file": tuple((kind, path) for kind in ("offsets", "commits") for path in _KINDS[kind]),
}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize a test over a fixture corpus by naming it as an argument (e.g. ``offsets_file``)."""
    for argname, values in _CORPORA.items():
        if argname in metafunc.fixturenames:
            ids = [value if isinstance(value, str) else value[1] for value in values]
            metafunc.parametrize(argname, values, ids=ids)


@pytest.fixture(scope="session")
def fixture_corpus() -> dict[str, tuple[str, ...]]:
    """The relative paths of the fixture files of each kind: offsets, commits, metadata."""
    return dict(_KINDS)


@pytest.fixture(scope="session")
def spark_resources() -> Path:
    """The folder of Spark-written fixtures (see /work/shared/fixtures/README.md)."""
    assert SPARK_TEST_RESOURCES.is_dir(), f"Spark fixtures not found at {SPARK_TEST_RESOURCES}"
    return SPARK_TEST_RESOURCES


@pytest.fixture
def memory_fs() -> Iterator[fsspec.AbstractFileSystem]:
    """fsspec's memory filesystem, emptied before and after the test (its store is global)."""
    fs = fsspec.filesystem("memory")
    _clear_memory_fs(fs)
    yield fs
    _clear_memory_fs(fs)


def _clear_memory_fs(fs: fsspec.AbstractFileSystem) -> None:
    fs.store.clear()
    fs.pseudo_dirs.clear()
    fs.pseudo_dirs.append("")


@pytest.fixture
def write_files() -> Callable[[Path, dict[str, bytes]], Path]:
    """Return a function that writes ``{relative path: bytes}`` below a local root."""

    def write(root: Path, files: dict[str, bytes]) -> Path:
        for relpath, data in files.items():
            path = root / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return root

    return write


@pytest.fixture
def checkpoint_copy(spark_resources: Path, tmp_path: Path) -> Callable[[str], Path]:
    """Return a function that copies a fixture checkpoint's metadata logs to a writable tmp dir.

    ``state/`` is left out; the copies are plain files (the originals are read-only).
    """

    def copy(name: str) -> Path:
        source, target = spark_resources / name, tmp_path / name
        for path in source.rglob("*"):
            relative = path.relative_to(source)
            if path.is_file() and relative.parts[0] != "state":
                (target / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, target / relative)
        return target

    return copy
