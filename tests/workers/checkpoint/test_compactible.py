from __future__ import annotations

import pytest

from fixture_paths import OUR_FIXTURES
from workers.checkpoint.compactible import (
    FileEntry,
    SinkFileStatus,
    all_valid_batches,
    derive_compact_interval,
    is_compaction_batch,
    next_compaction_batch_id,
    parse_sink_log_file,
    parse_source_log_file,
    plan_expired_files,
    valid_batches_before_compaction,
)
from workers.checkpoint.errors import CheckpointError, CorruptFileError, IncompleteLogFileError, UnsupportedVersionError
from workers.checkpoint.fileinfo import FileInfo

SINK_2_1 = "file-sink-log-version-2.1.0"
SOURCE_2_1 = "file-source-log-version-2.1.0"
WINDOWED_SINK_LOG = OUR_FIXTURES / "windowed_agg_file_sink/output/_spark_metadata"
DEDUP_SOURCE_LOG = OUR_FIXTURES / "file_source_dedup/checkpoint/sources/0"


# --- parsing the Spark 2.1 fixtures (trailing newline) ---


def test_sink_compaction_file_of_spark_2_1_holds_batches_0_to_7(spark_resources):
    statuses = parse_sink_log_file((spark_resources / SINK_2_1 / "7.compact").read_bytes(), source="7.compact")
    assert len(statuses) == 8
    assert statuses[0] == SinkFileStatus("/a/b/0", 1, False, 1, 1, 100, "add")
    assert statuses[-1] == SinkFileStatus("/a/b/7", 700, False, 700, 1, 100, "add")
    assert [s.size for s in statuses] == [1, 100, 200, 300, 400, 500, 600, 700]


def test_sink_delta_file_keeps_its_own_replication_and_block_size(spark_resources):
    statuses = parse_sink_log_file((spark_resources / SINK_2_1 / "9").read_bytes(), source="9")
    assert statuses == (SinkFileStatus("/a/b/9", 900, False, 900, 3, 200, "add"),)


def test_source_compaction_file_of_spark_2_1_lists_each_entry_with_its_batch(spark_resources):
    entries = parse_source_log_file((spark_resources / SOURCE_2_1 / "2.compact").read_bytes(), source="2.compact")
    assert entries == (
        FileEntry("/a/b/0", 1480730949000, 0),
        FileEntry("/a/b/1", 1480730950000, 1),
        FileEntry("/a/b/2", 1480730950000, 2),
    )


def test_source_delta_file_of_spark_2_1_has_one_entry(spark_resources):
    assert parse_source_log_file((spark_resources / SOURCE_2_1 / "4").read_bytes(), source="4") == (
        FileEntry("/a/b/4", 1480730951000, 4),
    )


# --- parsing the PySpark-written fixtures (no trailing newline) ---


def test_pyspark_sink_compaction_11_holds_fourteen_files_with_qualified_paths():
    statuses = parse_sink_log_file((WINDOWED_SINK_LOG / "11.compact").read_bytes(), source="11.compact")
    assert len(statuses) == 14
    assert statuses[0] == SinkFileStatus(
        "file:///work/main/tests/fixtures/windowed_agg_file_sink/output/"
        "part-00000-23467cb7-faa2-4cf4-b3ef-d39bffd74356-c000.json",
        0,
        False,
        1795321421803,
        1,
        33554432,
        "add",
    )
    assert sum(s.size for s in statuses) == 924
    assert {s.action for s in statuses} == {"add"}


def test_pyspark_sink_delta_files_hold_the_batch_outputs():
    assert len(parse_sink_log_file((WINDOWED_SINK_LOG / "9").read_bytes(), source="9")) == 1
    assert [s.size for s in parse_sink_log_file((WINDOWED_SINK_LOG / "10").read_bytes(), source="10")] == [0, 309]


def test_pyspark_source_compaction_5_repeats_batches_0_to_5():
    entries = parse_source_log_file((DEDUP_SOURCE_LOG / "5.compact").read_bytes(), source="5.compact")
    assert [e.batch_id for e in entries] == [0, 1, 2, 3, 4, 5]
    assert entries[5] == FileEntry(
        "file:///work/main/tests/fixtures/file_source_dedup/input/f005.json", 1704067500000, 5
    )


def test_pyspark_source_delta_7_has_the_eighth_input_file():
    assert parse_source_log_file((DEDUP_SOURCE_LOG / "7").read_bytes(), source="7") == (
        FileEntry("file:///work/main/tests/fixtures/file_source_dedup/input/f007.json", 1704067620000, 7),
    )


def test_a_log_file_with_only_the_version_line_has_no_entries():
    assert parse_sink_log_file(b"v1", source="3") == ()
    assert parse_source_log_file(b"v1\n", source="3") == ()


# --- corrupt copies ---


def _corrupt_copy(tmp_path, source_file, data: bytes):
    path = tmp_path / source_file.name
    path.write_bytes(data)
    return path


def test_truncated_sink_file_names_the_file_and_the_line(spark_resources, tmp_path):
    original = (spark_resources / SINK_2_1 / "7.compact").read_bytes()
    path = _corrupt_copy(tmp_path, spark_resources / SINK_2_1 / "7.compact", original[:200])
    with pytest.raises(CorruptFileError) as info:
        parse_sink_log_file(path.read_bytes(), source="_spark_metadata/7.compact")
    assert str(info.value).startswith("_spark_metadata/7.compact: line 3: invalid JSON")


def test_bad_json_in_a_source_file_names_the_file_and_the_line(spark_resources, tmp_path):
    original = (spark_resources / SOURCE_2_1 / "2.compact").read_bytes()
    damaged = original.replace(b'"batchId":1}', b'"batchId":1,}')
    path = _corrupt_copy(tmp_path, spark_resources / SOURCE_2_1 / "2.compact", damaged)
    with pytest.raises(CorruptFileError, match=r"^sources/0/2\.compact: line 3: invalid JSON"):
        parse_source_log_file(path.read_bytes(), source="sources/0/2.compact")


def test_version_2_header_is_refused_as_unsupported(tmp_path):
    data = (DEDUP_SOURCE_LOG / "6").read_bytes().replace(b"v1", b"v2", 1)
    path = _corrupt_copy(tmp_path, DEDUP_SOURCE_LOG / "6", data)
    with pytest.raises(UnsupportedVersionError, match=r"^sources/0/6: log version v2"):
        parse_source_log_file(path.read_bytes(), source="sources/0/6")


def test_missing_sink_field_names_the_field_and_the_line(tmp_path):
    data = (WINDOWED_SINK_LOG / "10").read_bytes().replace(b',"blockSize":33554432', b"")
    with pytest.raises(CorruptFileError, match=r"^_spark_metadata/10: line 2: missing field 'blockSize'"):
        parse_sink_log_file(data, source="_spark_metadata/10")


def test_missing_source_batch_id_is_corrupt():
    with pytest.raises(CorruptFileError, match=r"^sources/0/3: line 2: missing field 'batchId'"):
        parse_source_log_file(b'v1\n{"path":"/a","timestamp":1}', source="sources/0/3")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"v1\n[1]",
        b"v1\n{}",
        b'v1\n{"path":7,"timestamp":1,"batchId":0}',
        b'v1\n{"path":"/a","timestamp":"1","batchId":0}',
        b'v1\n{"path":"/a","timestamp":1,"batchId":0}\n\n',
        b"\xff\xfe",
        b"{}",
    ],
    ids=[
        "empty",
        "array",
        "empty-object",
        "path-not-string",
        "timestamp-not-long",
        "blank-line",
        "not-utf8",
        "no-version",
    ],
)
def test_damaged_source_lines_raise_a_checkpoint_error_naming_the_file(data):
    with pytest.raises(CheckpointError, match=r"^sources/0/1: "):
        parse_source_log_file(data, source="sources/0/1")


def test_sink_is_dir_must_be_a_boolean():
    line = b'{"path":"/a","size":1,"isDir":0,"modificationTime":1,"blockReplication":1,"blockSize":1,"action":"add"}'
    with pytest.raises(CorruptFileError, match="'isDir' must be true or false"):
        parse_sink_log_file(b"v1\n" + line, source="_spark_metadata/0")


def test_empty_sink_file_is_an_incomplete_log_file():
    with pytest.raises(IncompleteLogFileError, match=r"^_spark_metadata/4: Incomplete log file"):
        parse_sink_log_file(b"", source="_spark_metadata/4")


# --- compaction arithmetic (formats doc 5.2) ---


def test_with_interval_10_the_compaction_batches_are_9_19_29():
    assert [b for b in range(30) if is_compaction_batch(b, 10)] == [9, 19, 29]


def test_compaction_19_merges_batches_9_to_18():
    assert valid_batches_before_compaction(19, 10) == [9, 10, 11, 12, 13, 14, 15, 16, 17, 18]


def test_first_compaction_merges_from_batch_0():
    assert valid_batches_before_compaction(9, 10) == [0, 1, 2, 3, 4, 5, 6, 7, 8]


def test_valid_batches_before_a_non_compaction_batch_is_an_error():
    with pytest.raises(ValueError, match="18 is not a compaction batch"):
        valid_batches_before_compaction(18, 10)


@pytest.mark.parametrize(
    ("batch_id", "interval", "expected"),
    [
        (0, 10, [0]),
        (8, 10, [0, 1, 2, 3, 4, 5, 6, 7, 8]),
        (9, 10, [9]),
        (12, 10, [9, 10, 11, 12]),
        (19, 10, [19]),
        (9, 8, [7, 8, 9]),
        (4, 3, [2, 3, 4]),
        (7, 3, [5, 6, 7]),
        (11, 3, [11]),
    ],
)
def test_all_valid_batches_start_at_the_latest_compaction(batch_id, interval, expected):
    assert all_valid_batches(batch_id, interval) == expected


@pytest.mark.parametrize(
    ("batch_id", "interval", "expected"),
    [(0, 10, 9), (8, 10, 9), (9, 10, 19), (10, 10, 19), (11, 3, 14), (9, 8, 15)],
)
def test_next_compaction_batch_id_is_the_first_compaction_after_the_batch(batch_id, interval, expected):
    assert next_compaction_batch_id(batch_id, interval) == expected


def test_arithmetic_refuses_a_non_positive_interval():
    with pytest.raises(ValueError, match="compact interval must be positive"):
        is_compaction_batch(3, 0)


# --- compact interval derivation (formats doc 5.3) ---


@pytest.mark.parametrize(
    ("compact_batch_ids", "default_interval", "expected"),
    [
        ([], 10, 10),  # no compaction yet: the configured default
        ([9, 19], 10, 10),  # two or more: latest - previous
        ([8, 11], 10, 3),  # the PySpark sink fixture, written with interval 3
        ([2, 5], 10, 3),  # the PySpark source fixture
        ([19, 9, 29], 5, 10),  # order does not matter
        ([7], 10, 8),  # the 2.1 sink fixture: c + 1 <= default -> c + 1
        ([2], 10, 3),  # the 2.1 source fixture
        ([29], 10, 10),  # 30 has a divisor >= 10 up to 15: 10
        ([23], 10, 12),  # 24: divisors from 10 to 12 -> 12
        ([40], 10, 41),  # 41 is prime: no divisor found, c + 1
        ([13], 10, 14),  # default >= (c + 1) / 2: c + 1
        ([20], 10, 21),  # 10 < 21 // 2 is false: c + 1
    ],
)
def test_derive_compact_interval_follows_spark(compact_batch_ids, default_interval, expected):
    assert derive_compact_interval(compact_batch_ids, default_interval) == expected


# --- deleteExpiredLog plan (formats doc 5.4) ---

NOW = 1_000_000.0
OLD, RECENT = NOW - 601, NOW - 60


def _listing(names, mtime=OLD):
    return [FileInfo(name, 10, mtime, False) for name in names]


def test_nothing_expires_until_interval_batches_past_the_retained_ones():
    files = _listing([str(b) for b in range(9)] + ["9.compact", "10"])
    assert plan_expired_files(10, interval=10, min_batches_to_retain=2, files=files, now=NOW) == ()


def test_files_before_the_needed_compaction_expire_once_old_enough():
    # batch 29, retain 5: min batch 25 is read through compaction 19, so 0..18 may go.
    names = (
        [str(b) for b in range(9)]
        + ["9.compact"]
        + [str(b) for b in range(10, 19)]
        + ["19.compact", "20", "29.compact"]
    )
    planned = plan_expired_files(29, interval=10, min_batches_to_retain=5, files=_listing(names), now=NOW)
    assert planned == tuple(names[:19])
    assert "19.compact" not in planned


def test_recent_files_and_files_without_mtime_are_kept():
    files = [*_listing(["0", "1"], mtime=RECENT), FileInfo("2", 1, None, False), *_listing(["3"])]
    assert plan_expired_files(29, interval=10, min_batches_to_retain=5, files=files, now=NOW) == ("3",)


def test_checksums_temporaries_and_directories_are_never_planned():
    files = [
        *_listing([".0.crc", ".1.3b2c5a1e-8f1d-4d7e-9c1a-2b3c4d5e6f70.tmp", "notes"]),
        FileInfo("4", 0, OLD, True),
        *_listing(["5"]),
    ]
    assert plan_expired_files(29, interval=10, min_batches_to_retain=5, files=files, now=NOW) == ("5",)


def test_the_cleanup_delay_is_configurable():
    files = _listing(["0"], mtime=RECENT)
    assert plan_expired_files(
        29, interval=10, min_batches_to_retain=5, files=files, now=NOW, cleanup_delay_seconds=60
    ) == ("0",)
