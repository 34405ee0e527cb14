"""Integrity checks on Spark-written checkpoints, each damaged in exactly one way.

Every damage test copies a real fixture to tmp_path, damages it, and compares the findings with
those of the undamaged copy: the new findings (severity, code, path) must be exactly the
expected ones. What Spark does with each damage (and so the severity) is taken from Spark's
MicroBatchExecution, HDFSMetadataLog, CompactibleFileStreamLog and the state store providers.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES, our_fixture_checkpoints, shared_fixture_checkpoints
from workers.checkpoint.errors import StorageError
from workers.checkpoint.fileinfo import FileInfo
from workers.checkpoint.integrity.checks import run_checks
from workers.checkpoint.integrity.compactiblelogs import needed_log_files
from workers.checkpoint.integrity.facts import CheckpointFacts
from workers.checkpoint.integrity.gather import check_checkpoint, gather_facts
from workers.checkpoint.integrity.state import restart_state_version
from workers.checkpoint.inventory import TreeListing
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

TEMP_UUID = "1f0a1e22-1234-4567-89ab-0123456789ab"
HUGE = 2**63 - 2  # a batch id Spark could parse; the checks must not walk up to it
# Fixtures whose file sink writes to output/_spark_metadata (killed_mid_batch uses foreachBatch).
FILE_SINK_FIXTURES = ("windowed_agg_file_sink", "file_source_dedup", "stream_stream_join")


def _copy(source: Path, target: Path) -> Path:
    """Copy a fixture tree and make it writable (the shared fixtures are read-only)."""
    shutil.copytree(source, target, copy_function=shutil.copyfile)
    for path in (target, *target.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def _findings(root: Path, *, sink: bool) -> set[tuple[str, str, str]]:
    """(severity, code, path) of every finding; the checkpoint is root/checkpoint for our fixtures."""
    checkpoint = root / "checkpoint" if (root / "checkpoint").is_dir() else root
    sink_log = CheckpointStorage(str(root / "output")) if sink else None
    return {
        (f.severity, f.code, f.path) for f in check_checkpoint(CheckpointStorage(str(checkpoint)), sink_log=sink_log)
    }


@pytest.fixture
def damaged(tmp_path) -> Callable[[str, Callable[[Path], None]], set[tuple[str, str, str]]]:
    """Return a function: copy fixture ``name``, damage it, return the findings the damage added."""

    def damage(name: str, change: Callable[[Path], None]) -> set[tuple[str, str, str]]:
        source = OUR_FIXTURES / name if (OUR_FIXTURES / name).is_dir() else SPARK_TEST_RESOURCES / name
        root = _copy(source, tmp_path / name)
        sink = name in FILE_SINK_FIXTURES
        before = _findings(root, sink=sink)
        change(root / "checkpoint" if (root / "checkpoint").is_dir() else root)
        return _findings(root, sink=sink) - before

    return damage


def _sink_url(tmp_path: Path, fixture: str, name: str) -> str:
    return f"file://{tmp_path}/{fixture}/output/_spark_metadata/{name}"


# --- undamaged fixtures -------------------------------------------------------------------------

# What each undamaged fixture legitimately produces, worked out from its files by hand.
EXPECTED = {
    "windowed_agg_file_sink": set(),
    "file_source_dedup": set(),
    "stream_stream_join": set(),
    # SIGKILLed inside batch 6: offsets/6 exists, commits/6 does not.
    "killed_mid_batch": {("info", "batch-uncommitted", "offsets/6")},
    "hdfs_zstd_row_checksum": set(),
    "rocksdb_changelog_agg": set(),
    "rocksdb_checkpoint_v2_dedup": set(),
    "rocksdb_no_changelog_agg": set(),
    "rocksdb_stream_join": set(),
    # A streaming global limit keeps its state in partition 0 only (StreamingGlobalLimitExec requires
    # AllTuples), whatever spark.sql.shuffle.partitions (2) says.
    "rocksdb_limit_checkpoint_v2": set(),
    # Offsets 0, 1, 2, 4 and commits 0-2: batch 3 is the one Spark needs before batch 4.
    "checkpoint-test-offsetId-commitId-inconsistent": {
        ("error", "offsets-gap", "offsets/3"),
        ("info", "batch-uncommitted", "offsets/4"),
    },
    # Spark 2.1 wrote no commit log: batches 0 and 1 have no commit, and Spark takes batch 0 as done.
    "checkpoint-version-2.1.0": {("info", "no-commit-log", "commits")},
    "checkpoint-version-2.3.1-streaming-aggregate-state-format-1": set(),
    "checkpoint-version-2.4.0-streaming-join": set(),
    "checkpoint-version-3.2.0-deduplication-with-repartition": set(),
}
CHECKPOINTS = our_fixture_checkpoints() + shared_fixture_checkpoints()


def _fixture_name(checkpoint: Path) -> str:
    return checkpoint.parent.name if checkpoint.name == "checkpoint" else checkpoint.name


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=_fixture_name)
def test_each_undamaged_fixture_gives_exactly_its_known_findings(checkpoint):
    name = _fixture_name(checkpoint)
    found = _findings(
        checkpoint.parent if checkpoint.name == "checkpoint" else checkpoint, sink=name in FILE_SINK_FIXTURES
    )
    assert found == EXPECTED[name]


@pytest.mark.parametrize("checkpoint", our_fixture_checkpoints(), ids=_fixture_name)
def test_no_pyspark_fixture_has_an_error(checkpoint):
    name = _fixture_name(checkpoint)
    found = _findings(checkpoint.parent, sink=name in FILE_SINK_FIXTURES)
    assert [finding for finding in found if finding[0] == "error"] == []


def test_spark_2_1s_bare_sink_log_is_read_by_its_files_and_has_no_problem(tmp_path):
    # FileStreamSinkLogSuite's fixture: the log's files in a folder not named _spark_metadata.
    storage = CheckpointStorage(str(tmp_path))  # an empty checkpoint: the query has not started
    log = SPARK_TEST_RESOURCES / "file-sink-log-version-2.1.0"
    facts = gather_facts(storage, sink_log=CheckpointStorage(str(log)))
    assert [(f.severity, f.code) for f in run_checks(facts)] == [("info", "metadata-missing")]
    (sink,) = [log.outcome.value for log in facts.logs]
    assert sink.latest_batch == max(int(path.name.split(".")[0]) for path in log.iterdir())


def test_a_file_source_log_given_as_a_sink_log_is_an_error_naming_its_file(tmp_path):
    storage = CheckpointStorage(str(tmp_path))
    log = SPARK_TEST_RESOURCES / "file-source-log-version-2.1.0"
    findings = check_checkpoint(storage, sink_log=CheckpointStorage(str(log)))
    assert [(f.severity, f.code) for f in findings] == [("error", "file-corrupt"), ("info", "metadata-missing")]
    assert findings[0].path.startswith(log.as_uri())


def test_a_long_history_costs_no_more_reads_than_a_short_one(tmp_path):
    root = _copy(OUR_FIXTURES / "windowed_agg_file_sink", tmp_path / "fixture")
    storage = CheckpointStorage(str(root / "checkpoint"))
    check_checkpoint(storage)
    short = storage.calls.read
    for batch_id in range(0, 8):  # batches 0..7 before the retained 8..11
        for log in ("offsets", "commits"):
            shutil.copyfile(root / "checkpoint" / log / "8", root / "checkpoint" / log / str(batch_id))
    storage = CheckpointStorage(str(root / "checkpoint"))
    assert check_checkpoint(storage) == []
    # metadata, offsets/11, offsets/10 and commits/11: what Spark itself reads at restart.
    assert storage.calls.read == short == 4


# --- damage, one kind per test ------------------------------------------------------------------


def _write(relpath: str, data: bytes) -> Callable[[Path], None]:
    return lambda checkpoint: (checkpoint / relpath).write_bytes(data)


def _leftover(relpath: str, data: bytes) -> Callable[[Path], None]:
    """A file left by a write that died an hour ago (younger temporary files are writes in flight)."""

    def write(checkpoint: Path) -> None:
        (checkpoint / relpath).write_bytes(data)
        an_hour_ago = time.time() - 3600
        os.utime(checkpoint / relpath, (an_hour_ago, an_hour_ago))

    return write


def _delete(*relpaths: str) -> Callable[[Path], None]:
    def delete(checkpoint: Path) -> None:
        for relpath in relpaths:
            path = checkpoint / relpath
            shutil.rmtree(path) if path.is_dir() else path.unlink()

    return delete


def _with_checksum(relpath: str) -> tuple[str, str]:
    """The file and its Hadoop checksum, which a proper deletion removes together."""
    directory, slash, name = relpath.rpartition("/")
    return relpath, f"{directory}{slash}.{name}.crc"


def _replace_version(relpath: str, version: bytes) -> Callable[[Path], None]:
    def bump(checkpoint: Path) -> None:
        path = checkpoint / relpath
        header, newline, rest = path.read_bytes().partition(b"\n")
        path.write_bytes(version + newline + rest)

    return bump


def _cut_after_first_line(relpath: str) -> Callable[[Path], None]:
    def cut(checkpoint: Path) -> None:
        path = checkpoint / relpath
        path.write_bytes(path.read_bytes().partition(b"\n")[0] + b"\n")

    return cut


W = "windowed_agg_file_sink"
L = "rocksdb_limit_checkpoint_v2"
DAMAGES = [
    # (test id, fixture, damage, new findings)
    ("latest offsets file emptied", W, _write("offsets/11", b""), {("error", "log-file-empty", "offsets/11")}),
    ("old offsets file emptied", W, _write("offsets/8", b""), {("warning", "log-file-empty", "offsets/8")}),
    ("latest commit emptied", W, _write("commits/11", b""), {("error", "log-file-empty", "commits/11")}),
    (
        "offsets cut after the version line",
        W,
        _cut_after_first_line("offsets/11"),
        {("error", "log-file-incomplete", "offsets/11")},
    ),
    ("offsets metadata not json", W, _write("offsets/10", b"v1\n{oops"), {("error", "file-corrupt", "offsets/10")}),
    (
        "offsets header bumped to v99",
        W,
        _replace_version("offsets/11", b"v99"),
        {("error", "log-version-unsupported", "offsets/11")},
    ),
    (
        "commit header bumped to v99",
        W,
        _replace_version("commits/11", b"v99"),
        {("error", "log-version-unsupported", "commits/11")},
    ),
    ("metadata file corrupt", W, _write("metadata", b'{"id":'), {("error", "file-corrupt", "metadata")}),
    ("metadata file deleted", W, _delete(*_with_checksum("metadata")), {("error", "metadata-missing", "metadata")}),
    ("old offsets deleted", W, _delete(*_with_checksum("offsets/9")), {("warning", "offsets-gap", "offsets/9")}),
    (
        "offsets before the latest deleted",
        W,
        _delete(*_with_checksum("offsets/10")),
        {("error", "offsets-gap", "offsets/10")},
    ),
    (
        "latest two commits deleted",
        W,
        _delete(*_with_checksum("commits/11"), *_with_checksum("commits/10")),
        {("warning", "uncommitted-batches", "offsets/10")},
    ),
    (
        "every commit deleted, commits/ kept",
        W,
        _delete(*(path for batch_id in range(8, 12) for path in _with_checksum(f"commits/{batch_id}"))),
        {("warning", "uncommitted-batches", "offsets/8")},
    ),
    # Not taken for a Spark 2.1 checkpoint (no-commit-log): its offsets carry the SQL conf 2.2 added.
    ("commits/ directory removed", W, _delete("commits"), {("warning", "uncommitted-batches", "offsets/8")}),
    # The same batches, with the commits/ directory Spark 2.2 would have made: no longer a 2.1 checkpoint.
    (
        "an empty commits/ beside Spark 2.1's offsets",
        "checkpoint-version-2.1.0",
        lambda checkpoint: (checkpoint / "commits").mkdir(),
        {("warning", "uncommitted-batches", "offsets/0")},
    ),
    (
        "a commit below the latest deleted",
        W,
        _delete(*_with_checksum("commits/9")),
        {("warning", "commit-missing", "commits/9")},
    ),
    (
        "latest offsets deleted, commit kept",
        W,
        _delete(*_with_checksum("offsets/11")),
        {("error", "commit-without-offsets", "commits/11")},
    ),
    (
        "file source compaction deleted",
        "file_source_dedup",
        _delete(*_with_checksum("sources/0/5.compact")),
        {("error", "compact-missing", "sources/0/5.compact")},
    ),
    (
        "file source batch after the compaction deleted",
        "file_source_dedup",
        _delete(*_with_checksum("sources/0/6")),
        {("error", "log-file-missing", "sources/0/6")},
    ),
    (
        "file source compaction bumped to v99",
        "file_source_dedup",
        _replace_version("sources/0/5.compact", b"v99"),
        {("error", "log-version-unsupported", "sources/0/5.compact")},
    ),
    (
        "file source batch emptied",
        "file_source_dedup",
        _write("sources/0/7", b""),
        {("error", "log-file-empty", "sources/0/7")},
    ),
    (
        "spark 4 temporary file in offsets",
        W,
        _leftover(f"offsets/.12.{TEMP_UUID}.tmp", b"v1"),
        {("warning", "temporary-file", f"offsets/.12.{TEMP_UUID}.tmp")},
    ),
    (
        "task temporary file and its checksum in state",
        W,
        lambda c: (
            _leftover(f"state/0/1/.13.delta.{TEMP_UUID}.TID7.tmp", b"x")(c),
            _leftover(f"state/0/1/..13.delta.{TEMP_UUID}.TID7.tmp.crc", b"crc")(c),
        ),
        {
            ("warning", "temporary-file", f"state/0/1/.13.delta.{TEMP_UUID}.TID7.tmp"),
            ("warning", "temporary-file", f"state/0/1/..13.delta.{TEMP_UUID}.TID7.tmp.crc"),
        },
    ),
    (
        "spark 2.1 metadata log temporary file",
        W,
        _leftover(f"commits/.{TEMP_UUID}.tmp", b"v1"),
        {("warning", "temporary-file", f"commits/.{TEMP_UUID}.tmp")},
    ),
    (
        "spark 2 state store temporary file",
        W,
        _leftover("state/0/0/temp-7351190457396462398", b""),
        {("warning", "temporary-file", "state/0/0/temp-7351190457396462398")},
    ),
    (
        "state delta deleted without its checksum",
        W,
        _delete("state/0/0/6.delta"),
        {("warning", "orphan-checksum", "state/0/0/.6.delta.crc")},
    ),
    (
        "latest state snapshot and delta deleted",
        W,
        _delete(*_with_checksum("state/0/1/12.snapshot"), *_with_checksum("state/0/1/12.delta")),
        {("error", "state-version-missing", "state/0/1/12.delta")},
    ),
    (
        "a join store's delta deleted",
        "stream_stream_join",
        _delete(*_with_checksum("state/0/1/left-keyToNumValues/11.delta")),
        {("error", "state-version-missing", "state/0/1/left-keyToNumValues/11.delta")},
    ),
    (
        "state delta of the rerun batch deleted",
        "killed_mid_batch",
        _delete(*_with_checksum("state/0/0/6.snapshot"), *_with_checksum("state/0/0/5.delta")),
        {("error", "state-version-missing", "state/0/0/5.delta")},
    ),
    ("a state partition deleted", W, _delete("state/0/1"), {("error", "state-partition-missing", "state/0/1")}),
    (
        "a rocksdb aggregation's partition deleted",
        "rocksdb_changelog_agg",
        _delete("state/0/1"),
        {("error", "state-partition-missing", "state/0/1")},
    ),
    # Nothing left tells a global limit from a keyed operator that lost partition 1.
    (
        "a global limit's operator metadata and schema deleted",
        L,
        _delete("state/0/_metadata", "state/0/0/_metadata"),
        {("error", "state-partition-missing", "state/0/1")},
    ),
    # A listed file that cannot be read: here a dangling link, as a file vanishing mid-check leaves it.
    (
        "latest offsets file unreadable",
        W,
        lambda c: ((c / "offsets/11").unlink(), (c / "offsets/11").symlink_to(c / "no-such-target")),
        {("error", "file-unreadable", "offsets/11")},
    ),
    (
        "rocksdb zip and changelog deleted",
        "rocksdb_changelog_agg",
        _delete(*_with_checksum("state/0/0/12.zip"), *_with_checksum("state/0/0/11.changelog")),
        {("error", "state-version-missing", "state/0/0/11.changelog")},
    ),
    (
        "rocksdb format 2 changelog deleted",
        "rocksdb_checkpoint_v2_dedup",
        lambda c: [p.unlink() for p in (c / "state/0/0").glob("*11_ded8445b-dcee-4241-96b0-67f4cc892b37.changelog*")],
        {("error", "state-version-missing", "state/0/0/11.changelog")},
    ),
    (
        "offsets file named with the largest long",
        W,
        lambda c: shutil.copyfile(c / "offsets/11", c / f"offsets/{HUGE}"),
        {
            ("error", "offsets-gap", "offsets/12"),
            ("info", "batch-uncommitted", f"offsets/{HUGE}"),
            ("error", "state-version-missing", f"state/0/0/{HUGE}.delta"),
            ("error", "state-version-missing", f"state/0/1/{HUGE}.delta"),
        },
    ),
    (
        "spark 3.2 state delta deleted",
        "checkpoint-version-3.2.0-deduplication-with-repartition",
        _delete(*_with_checksum("state/0/3/1.delta")),
        {("error", "state-version-missing", "state/0/3/1.delta")},
    ),
    (
        "spark 2.4 offsets emptied",
        "checkpoint-version-2.4.0-streaming-join",
        _write("offsets/0", b""),
        {("error", "log-file-empty", "offsets/0")},
    ),
]


@pytest.mark.parametrize(("fixture", "damage", "expected"), [d[1:] for d in DAMAGES], ids=[d[0] for d in DAMAGES])
def test_each_damage_adds_exactly_its_finding(damaged, fixture, damage, expected):
    assert damaged(fixture, damage) == expected


def test_a_global_limit_is_told_by_its_schema_alone_as_spark_before_4_0_wrote_no_operator_metadata(tmp_path):
    root = _copy(OUR_FIXTURES / L, tmp_path / L)
    shutil.rmtree(root / "checkpoint/state/0/_metadata")
    assert _findings(root, sink=False) == set()


def test_rocksdb_version_rebuilt_from_an_older_zip_and_changelogs_is_fine(damaged):
    assert damaged("rocksdb_changelog_agg", _delete(*_with_checksum("state/0/0/12.zip"))) == set()


def test_sink_log_compaction_bumped_to_v99(damaged, tmp_path):
    found = damaged(W, lambda c: _replace_version("11.compact", b"v99")(c.parent / "output" / "_spark_metadata"))
    assert found == {("error", "log-version-unsupported", _sink_url(tmp_path, W, "11.compact"))}


def test_sink_log_losing_its_latest_batch_is_behind_the_commits(damaged, tmp_path):
    found = damaged(W, lambda c: _delete(*_with_checksum("_spark_metadata/11.compact"))(c.parent / "output"))
    assert found == {("error", "sink-log-behind-commits", _sink_url(tmp_path, W, "11"))}


def test_sink_log_compaction_missing_under_the_derived_interval(tmp_path):
    # Without 7.compact Spark derives the default interval 10, so batch 9 is read as 9.compact.
    log = _copy(SPARK_TEST_RESOURCES / "file-sink-log-version-2.1.0", tmp_path / "_spark_metadata")
    (log / "7.compact").unlink()
    findings = check_checkpoint(CheckpointStorage(str(tmp_path / "empty")), sink_log=CheckpointStorage(str(log)))
    assert {(f.severity, f.code, f.path) for f in findings} == {
        ("info", "metadata-missing", "metadata"),
        ("error", "compact-missing", f"file://{log}/9.compact"),
    }


def test_a_foreach_batch_output_checked_as_a_sink_log_is_questioned():
    root = OUR_FIXTURES / "killed_mid_batch"
    found = _findings(root, sink=True) - _findings(root, sink=False)
    assert found == {("warning", "sink-log-missing", f"file://{root}/output/_spark_metadata")}


def test_messages_say_what_is_wrong_and_what_a_restart_does(damaged, tmp_path):
    root = _copy(OUR_FIXTURES / W, tmp_path / "copy")
    _replace_version("offsets/11", b"v99")(root / "checkpoint")
    [finding] = check_checkpoint(CheckpointStorage(str(root / "checkpoint")))
    assert finding.message == "log version v99 is newer than the supported v2"
    assert finding.restart_impact.startswith("Spark fails at restart")


def test_a_directory_that_cannot_be_listed_is_an_error():
    root = (FileInfo("metadata", 45, None, False), FileInfo("offsets", 0, None, True))
    listing = TreeListing({"": root}, (StorageError("offsets", "permission denied"),))
    findings = run_checks(CheckpointFacts(listing, reads=()))
    assert [(f.severity, f.code, f.path, f.message) for f in findings] == [
        ("error", "directory-unreadable", "offsets", "permission denied"),
    ]


def _every_file(root: Path) -> list[str]:
    """The checkpoint's files and the sink log's (the sink's data files are never read)."""
    paths = [*(root / "checkpoint").rglob("*"), *(root / "output" / "_spark_metadata").iterdir()]
    return sorted(str(p.relative_to(root)) for p in paths if p.is_file())


@pytest.mark.parametrize("relpath", _every_file(OUR_FIXTURES / "file_source_dedup"))
def test_no_truncated_file_makes_the_check_raise(tmp_path, relpath):
    root = _copy(OUR_FIXTURES / "file_source_dedup", tmp_path / "copy")
    data = (root / relpath).read_bytes()
    (root / relpath).write_bytes(data[: len(data) // 2])
    check_checkpoint(CheckpointStorage(str(root / "checkpoint")), sink_log=CheckpointStorage(str(root / "output")))


@pytest.mark.parametrize(
    ("offsets", "commits", "version"),
    [([], [], None), ([0], [], 0), ([3, 4], [3, 4], 5), ([3, 4], [3], 4), ([0, 1], [], 1), ([5, 6], [9], 6)],
)
def test_restart_loads_the_state_version_of_the_batch_it_runs(offsets, commits, version):
    assert restart_state_version(offsets, commits) == version


def test_needed_files_of_the_spark_2_1_source_log_are_its_compaction_and_the_two_after():
    log = SPARK_TEST_RESOURCES / "file-source-log-version-2.1.0"
    files = [FileInfo(p.name, p.stat().st_size, None, False) for p in log.iterdir()]
    assert needed_log_files(files) == ["2.compact", "3", "4"]


# --- what Spark 4.3 does with the damaged copies ---------------------------------------------------

RESTART_CASES = [
    "old offsets deleted",
    "offsets before the latest deleted",
    "latest offsets deleted, commit kept",
    "latest two commits deleted",
    "commits/ directory removed",
    "latest offsets file emptied",
    "old offsets file emptied",
    "offsets header bumped to v99",
    "metadata file deleted",
    "latest state snapshot and delta deleted",
    "a state partition deleted",
    "spark 4 temporary file in offsets",
]
# A restarted query either fails at once or commits its next batch; both take well under a minute alone.
RESTART_TIMEOUT_SECONDS = 180


@pytest.fixture(scope="module")
def spark_session():
    from pyspark.sql import SparkSession

    from pipelines.queries import build_session

    active = SparkSession.getActiveSession()
    session = active or build_session("ckptweb-integrity-tests", master="local[1]")
    yield session
    if active is None:
        session.stop()


def _restart(spark, base: Path, batches_after: int = 1) -> str | None:
    """Resume the windowed fixture query on ``base``; return Spark's error, None if it ran on."""
    from pipelines.generate_fixtures import RATE
    from pipelines.queries import windowed_agg_file_sink_query

    target = max(int(p.name) for p in (base / "checkpoint" / "offsets").iterdir() if p.name.isdigit()) + batches_after
    try:
        query = windowed_agg_file_sink_query(spark, base, RATE).trigger(processingTime="0 seconds").start()
    except Exception as exc:  # noqa: BLE001 - any failure to start is the observation
        return str(exc)
    deadline = time.monotonic() + RESTART_TIMEOUT_SECONDS
    try:
        while query.isActive and (query.lastProgress or {}).get("batchId", -1) < target:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {RESTART_TIMEOUT_SECONDS} s waiting for the restarted query to fail or "
                    f"commit batch {target}; last progress {query.lastProgress}"
                )
            time.sleep(0.05)
        return None if query.exception() is None else str(query.exception())
    finally:
        # The copy is thrown away: a stop inside a batch harms nothing here, and waiting for a gap
        # between the 0-second trigger's batches, which it seldom leaves, cost up to 30 s a case.
        query.stop()


@pytest.mark.spark
@pytest.mark.parametrize("case", RESTART_CASES)
def test_spark_fails_to_restart_exactly_when_there_is_an_error(spark_session, tmp_path, case):
    [(_, fixture, damage, expected)] = [d for d in DAMAGES if d[0] == case]
    base = _copy(OUR_FIXTURES / fixture, tmp_path / fixture)
    damage(base / "checkpoint")
    has_error = any(severity == "error" for severity, _, _ in _findings(base, sink=True))
    assert has_error == any(severity == "error" for severity, _, _ in expected)
    failure = _restart(spark_session, base)
    assert (failure is not None) == has_error, failure


@pytest.mark.spark
def test_spark_restarts_behind_a_sink_log_but_the_sink_can_no_longer_be_read(spark_session, tmp_path):
    base = _copy(OUR_FIXTURES / W, tmp_path / W)
    _delete(*_with_checksum("_spark_metadata/11.compact"))(base / "output")
    assert _restart(spark_session, base) is None
    with pytest.raises(Exception, match="11"):
        spark_session.read.json(str(base / "output")).count()


def test_a_temporary_file_of_a_write_in_progress_is_not_a_finding(damaged):
    # A running query's commit leaves `.N.<uuid>.tmp` for a moment before the rename.
    assert damaged(W, _write(f"commits/.12.{TEMP_UUID}.tmp", b"v1")) == set()


def test_a_spark_2_1_checkpoint_is_resumed_after_its_one_done_batch():
    """Offsets 0 and 1 and no commit log: Spark takes batch 0 as done and re-runs batch 1."""
    [finding] = check_checkpoint(CheckpointStorage(str(SPARK_TEST_RESOURCES / "checkpoint-version-2.1.0")))

    assert (finding.code, finding.restart_impact) == (
        "no-commit-log",
        "Spark treats batch 0 as done and re-runs batch 1 from the offsets of batch 0; "
        "it writes commits/ from then on.",
    )
