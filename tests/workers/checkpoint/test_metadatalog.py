from __future__ import annotations

import shutil

import pytest

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.errors import CorruptFileError, MissingFileError, UnsupportedVersionError
from workers.checkpoint.metadatalog import MetadataLogSummary, file_source_log_dirs, read_metadata_log
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

WINDOWED_SINK_LOG = "windowed_agg_file_sink/output/_spark_metadata"
DEDUP_SOURCE_LOG = "file_source_dedup/checkpoint/sources/0"


# (root, log directory, kind) -> (interval, latest batch, compactions, live entries, latest compact bytes),
# worked out by hand from the files: the Spark 2.1 sink derives interval 8 from its only compaction;
# the Spark 2.1 source log is 2.compact plus deltas 3 and 4; the PySpark sink ends on 11.compact,
# which holds everything; the PySpark source log is 5.compact plus batches 6 and 7.
SUMMARIES = [
    ("spark", "file-sink-log-version-2.1.0", "sink", (8, 9, (7,), 10, 943)),
    ("spark", "file-source-log-version-2.1.0", "source", (3, 4, (2,), 5, 171)),
    ("ours", WINDOWED_SINK_LOG, "sink", (3, 11, (8, 11), 14, 3440)),
    ("ours", DEDUP_SOURCE_LOG, "source", (3, 7, (2, 5), 8, 698)),
]


@pytest.fixture
def our_storage():
    return CheckpointStorage(str(OUR_FIXTURES))


@pytest.mark.parametrize(("root", "dirname", "kind", "expected"), SUMMARIES, ids=[s[1] for s in SUMMARIES])
def test_each_fixture_log_summary(spark_resources, root, dirname, kind, expected):
    base = spark_resources if root == "spark" else OUR_FIXTURES
    summary = read_metadata_log(CheckpointStorage(str(base)), dirname, kind=kind)
    compact_sizes = tuple((batch, (base / dirname / f"{batch}.compact").stat().st_size) for batch in expected[2])
    assert summary == MetadataLogSummary(dirname, kind, 1, *expected, compact_file_bytes=compact_sizes)


def test_pyspark_sink_log_reads_only_the_latest_compaction(our_storage):
    read_metadata_log(our_storage, WINDOWED_SINK_LOG, kind="sink")
    assert (our_storage.calls.list, our_storage.calls.read, our_storage.calls.bytes_read) == (1, 1, 3440)


def test_pyspark_source_log_reads_compaction_5_and_batches_6_and_7(our_storage):
    read_metadata_log(our_storage, DEDUP_SOURCE_LOG, kind="source")
    # 5.compact (698 bytes), 6 and 7 (118 bytes each); 2.compact, 3 and 4 are not needed.
    assert (our_storage.calls.read, our_storage.calls.bytes_read) == (3, 934)


def test_missing_log_directory_has_no_batches(tmp_path):
    summary = read_metadata_log(CheckpointStorage(str(tmp_path)), "sources/0", kind="source", default_interval=5)
    assert summary == MetadataLogSummary("sources/0", "source", None, 5, None, (), 0, 0, ())


def test_log_without_compaction_uses_the_default_interval_and_reads_every_batch(tmp_path, write_files):
    entry = b'{"path":"/in/f%d","timestamp":1,"batchId":%d}'
    write_files(tmp_path, {f"sources/0/{b}": b"v1\n" + entry % (b, b) for b in range(3)})
    summary = read_metadata_log(CheckpointStorage(str(tmp_path)), "sources/0", kind="source")
    assert (summary.compact_interval, summary.latest_batch, summary.live_entries) == (10, 2, 3)
    assert (summary.compact_batches, summary.latest_compact_bytes) == ((), 0)


def test_spark_2_sink_delete_entries_remove_their_files(tmp_path, write_files):
    def status(path, action):
        return (
            b'{"path":"%s","size":1,"isDir":false,"modificationTime":1,"blockReplication":1,'
            b'"blockSize":1,"action":"%s"}' % (path, action)
        )

    write_files(
        tmp_path,
        {
            "_spark_metadata/0": b"v1\n" + status(b"/a", b"add") + b"\n" + status(b"/b", b"add"),
            "_spark_metadata/1": b"v1\n" + status(b"/c", b"add") + b"\n" + status(b"/a", b"delete"),
        },
    )
    summary = read_metadata_log(CheckpointStorage(str(tmp_path)), "_spark_metadata", kind="sink")
    assert summary.live_entries == 2


def test_missing_delta_file_after_the_compaction_is_reported(spark_resources, tmp_path):
    log = tmp_path / "log"
    shutil.copytree(spark_resources / "file-source-log-version-2.1.0", log)
    log.chmod(0o755)  # the fixture folder is read-only, and so is its copy
    (log / "3").unlink()
    with pytest.raises(MissingFileError, match=r"^log/3: "):
        read_metadata_log(CheckpointStorage(str(tmp_path)), "log", kind="source")


def test_corrupt_compaction_file_is_named_in_the_error(spark_resources, tmp_path, write_files):
    # Entry lines start at bytes 3, 117, 235, 353 and 471: byte 500 cuts line 6.
    data = (spark_resources / "file-sink-log-version-2.1.0/7.compact").read_bytes()
    write_files(tmp_path, {"_spark_metadata/7.compact": data[:500], "_spark_metadata/8": b"v1"})
    with pytest.raises(CorruptFileError, match=r"^_spark_metadata/7\.compact: line 6: invalid JSON"):
        read_metadata_log(CheckpointStorage(str(tmp_path)), "_spark_metadata", kind="sink")


def test_version_2_delta_file_is_unsupported(tmp_path, write_files):
    write_files(tmp_path, {"sources/0/0": b"v1", "sources/0/1": b"v2\n{}"})
    with pytest.raises(UnsupportedVersionError, match=r"^sources/0/1: log version v2"):
        read_metadata_log(CheckpointStorage(str(tmp_path)), "sources/0", kind="source")


def test_unknown_kind_is_refused(our_storage):
    with pytest.raises(ValueError, match="kind must be 'source' or 'sink'"):
        read_metadata_log(our_storage, DEDUP_SOURCE_LOG, kind="state")  # type: ignore[arg-type]


def test_file_source_logs_are_found_from_the_offsets_of_file_sources_only():
    offsets = [{"logOffset": 3}, {"topic": {"0": 5}}, 7, None, {"logOffset": 0}]
    assert file_source_log_dirs(offsets) == ["sources/0", "sources/4"]
