"""Rows of HDFS state at a version equal what Spark reported for the batch that wrote it.

Each fixture's spark-report.json holds Spark's own progress: stateOperators[0].numRowsTotal of
batch B is the number of rows of state version B + 1 over all partitions.
"""

from __future__ import annotations

import json

import pytest

from fixture_paths import OUR_FIXTURES
from state_corpus import OUR_STATE_CHECKPOINTS
from workers.checkpoint.errors import MissingFileError
from workers.checkpoint.stateinventory import list_state_store_dirs, parse_hdfs_state_files
from workers.checkpoint.staterows import StateSize, read_state_size
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage


def _reported_rows(name: str) -> dict[int, int]:
    report = json.loads((OUR_FIXTURES / name / "spark-report.json").read_text())
    return {p["batchId"] + 1: p["stateOperators"][0]["numRowsTotal"] for p in report["progress"] if p["stateOperators"]}


def _rebuildable_versions(stores) -> set[int]:
    versions = set()
    for store in stores:
        versions |= {f.version for f in parse_hdfs_state_files(store.files)[0]}
    return versions


@pytest.mark.parametrize("name", [n for n in OUR_STATE_CHECKPOINTS if n != "stream_stream_join"])
def test_rows_at_each_retained_version_equal_spark_s_progress(name):
    codec, row_checksum = OUR_STATE_CHECKPOINTS[name]
    storage = CheckpointStorage(str(OUR_FIXTURES / name / "checkpoint"))
    stores = list_state_store_dirs(storage)
    compared = 0
    for version, expected in _reported_rows(name).items():
        if version not in _rebuildable_versions(stores):
            continue
        try:
            sizes = [read_state_size(storage, s, version, codec=codec, row_checksum=row_checksum) for s in stores]
        except MissingFileError:
            continue  # an early version whose deltas maintenance deleted
        assert sum(size.rows for size in sizes) == expected, version
        compared += 1
    assert compared >= 2


def test_version_zero_is_the_empty_state():
    storage = CheckpointStorage(str(OUR_FIXTURES / "killed_mid_batch" / "checkpoint"))
    store = list_state_store_dirs(storage)[0]
    assert read_state_size(storage, store, 0) == StateSize(0, 0, 0)


def test_a_version_with_a_missing_delta_is_a_missing_file_error():
    storage = CheckpointStorage(str(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"))
    store = list_state_store_dirs(storage)[0]
    with pytest.raises(MissingFileError, match=r"^state/0/0/1\.delta: "):
        read_state_size(storage, store, 6)
