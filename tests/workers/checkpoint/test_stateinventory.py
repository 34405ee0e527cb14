"""Listing state/ through CheckpointStorage, provider detection and Spark's file rules."""

from __future__ import annotations

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint.errors import MissingFileError
from workers.checkpoint.stateinventory import (
    HdfsStateFile,
    StateFileInfo,
    detect_provider,
    files_for_version,
    list_state_store_dirs,
    parse_hdfs_state_files,
    summarize_hdfs_store,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

JOIN_STORES = ["left-keyToNumValues", "left-keyWithIndexToValue", "right-keyToNumValues", "right-keyWithIndexToValue"]


def test_join_stores_are_listed_per_partition_with_one_list_per_directory():
    storage = CheckpointStorage(str(SPARK_TEST_RESOURCES / "checkpoint-version-2.4.0-streaming-join"))
    stores = list_state_store_dirs(storage)
    assert [(s.partition, s.store) for s in stores] == [(p, name) for p in range(5) for name in JOIN_STORES]
    assert stores[0].path == "state/0/0/left-keyToNumValues"
    # state/, state/0/, 5 partitions, 20 stores
    assert storage.calls.list == 1 + 1 + 5 + 20


def test_operator_metadata_directories_are_not_partitions():
    storage = CheckpointStorage(str(OUR_FIXTURES / "file_source_dedup" / "checkpoint"))
    stores = list_state_store_dirs(storage)
    assert [(s.operator, s.partition, s.store) for s in stores] == [(0, 0, "default"), (0, 1, "default")]
    assert "_metadata" not in {f.name for s in stores for f in s.files}


def test_a_checkpoint_without_state_has_no_stores():
    storage = CheckpointStorage(str(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"))
    assert list_state_store_dirs(storage) == []


@pytest.mark.parametrize(
    ("fixture", "provider"),
    [
        ("windowed_agg_file_sink", "hdfs"),
        ("hdfs_zstd_row_checksum", "hdfs"),
        ("rocksdb_changelog_agg", "rocksdb"),
        ("rocksdb_checkpoint_v2_dedup", "rocksdb"),
    ],
)
def test_the_provider_is_told_from_the_file_names(fixture, provider):
    stores = list_state_store_dirs(CheckpointStorage(str(OUR_FIXTURES / fixture / "checkpoint")))
    assert {detect_provider(s.files) for s in stores} == {provider}


def test_only_checksum_and_temporary_files_make_an_empty_store():
    files = [StateFileInfo(".1.delta.crc", 12), StateFileInfo(".2.delta.0f1c2d3e-aaaa-bbbb-cccc-0123456789ab.tmp", 5)]
    assert detect_provider(files) == "empty"
    assert detect_provider(files + [StateFileInfo("notes.txt", 1)]) == "unknown"


def _infos(*names: str) -> list[StateFileInfo]:
    return [StateFileInfo(name, 10) for name in names]


def test_fetch_files_rules_snapshot_shadows_delta_and_unknown_names_are_reported():
    files, unknown = parse_hdfs_state_files(
        _infos(
            "2.delta", "1.delta", "2.snapshot", "3.DELTA", ".3.delta.crc", "3.crc", "4.delta.bak", "x.delta", "5.zip"
        )
    )
    assert [(f.version, f.kind, f.name) for f in files] == [
        (1, "delta", "1.delta"),
        (2, "snapshot", "2.snapshot"),
        (3, "delta", "3.DELTA"),
    ]
    assert unknown == ("4.delta.bak", "x.delta", "5.zip")


def _chain(*names: str) -> tuple[HdfsStateFile, ...]:
    return parse_hdfs_state_files(_infos(*names))[0]


def test_files_for_version_takes_the_latest_snapshot_and_the_deltas_after_it():
    chain = _chain("4.snapshot", "5.delta", "6.delta", "7.snapshot", "8.delta")
    assert [f.name for f in files_for_version(chain, 6)] == ["4.snapshot", "5.delta", "6.delta"]
    assert [f.name for f in files_for_version(chain, 7)] == ["7.snapshot"]
    assert [f.name for f in files_for_version(chain, 8)] == ["7.snapshot", "8.delta"]


def test_a_missing_delta_after_the_snapshot_is_named():
    with pytest.raises(MissingFileError, match=r"^state/0/3/6\.delta: missing delta file"):
        files_for_version(_chain("4.snapshot", "5.delta", "7.delta"), 7, source="state/0/3")


def test_without_a_snapshot_loading_needs_every_delta_but_spark_s_listing_does_not():
    chain = _chain("2.delta", "3.delta")
    with pytest.raises(MissingFileError, match=r"^1\.delta: "):
        files_for_version(chain, 3)
    assert [f.name for f in files_for_version(chain, 3, require_complete=False)] == ["2.delta", "3.delta"]


def test_a_version_without_a_file_is_missing():
    with pytest.raises(MissingFileError, match="no delta or snapshot file for version 9"):
        files_for_version(_chain("1.delta"), 9)


def test_the_summary_counts_deltas_since_the_last_snapshot_and_every_byte_on_disk():
    summary = summarize_hdfs_store(_infos("4.snapshot", "4.delta", "5.delta", "6.delta", ".6.delta.crc"))
    assert (summary.latest_version, summary.last_snapshot_version, summary.deltas_since_snapshot) == (6, 4, 2)
    assert summary.bytes_on_disk == 50
