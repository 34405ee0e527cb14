"""The file inventory, checked against an independent os.walk count of Spark-written checkpoints."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, our_fixture_checkpoints, shared_fixture_checkpoints
from workers.checkpoint.fileinfo import FileInfo
from workers.checkpoint.inventory import (
    SMALL_FILE_BYTES,
    DirectoryInventory,
    TreeListing,
    build_inventory,
    take_inventory,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

CHECKPOINTS = our_fixture_checkpoints() + shared_fixture_checkpoints()
CHECKPOINT_IDS = [f"{path.parent.name}/{path.name}" for path in CHECKPOINTS]


def _row_of(relative_dir: tuple[str, ...], name: str) -> str:
    """The row a file belongs to, by the layout rule written out plainly for the test."""
    if not relative_dir:
        return "metadata" if name in ("metadata", ".metadata.crc") else name
    if relative_dir[0] in ("sources", "state") and len(relative_dir) >= 2:
        return "/".join(relative_dir[:2])
    return relative_dir[0]


def _walk_counts(root: Path) -> dict[str, tuple[int, int, int]]:
    """(files, bytes, files not starting with a dot) per row, counted with os.walk."""
    files, sizes, opened = Counter(), Counter(), Counter()
    for dirpath, _, filenames in os.walk(root):
        relative = Path(dirpath).relative_to(root).parts
        for name in filenames:
            row = _row_of(relative, name)
            files[row] += 1
            sizes[row] += os.path.getsize(os.path.join(dirpath, name))
            opened[row] += not name.startswith(".")
    return {row: (files[row], sizes[row], opened[row]) for row in files}


def _rows_by_path(rows: list[DirectoryInventory]) -> dict[str, DirectoryInventory]:
    return {row.path: row for row in rows}


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=CHECKPOINT_IDS)
def test_files_bytes_and_gets_of_each_row_match_an_os_walk_count(checkpoint):
    rows = take_inventory(CheckpointStorage(str(checkpoint)))
    counted = {row.path: (row.files, row.bytes, row.get_requests) for row in rows if row.files}
    assert counted == _walk_counts(checkpoint)


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=CHECKPOINT_IDS)
def test_one_list_request_per_directory_of_a_small_checkpoint(checkpoint):
    rows = take_inventory(CheckpointStorage(str(checkpoint)))
    assert sum(row.list_requests for row in rows) == sum(1 for _ in os.walk(checkpoint))


@pytest.mark.parametrize("checkpoint", CHECKPOINTS, ids=CHECKPOINT_IDS)
@pytest.mark.parametrize("log", ["offsets", "commits"])
def test_oldest_and_newest_batch_are_the_extreme_file_names(checkpoint, log):
    names = os.listdir(checkpoint / log) if (checkpoint / log).is_dir() else []
    ids = [int(name) for name in names if name.isdigit()]
    row = _rows_by_path(take_inventory(CheckpointStorage(str(checkpoint)))).get(log)
    expected = (min(ids), max(ids)) if ids else None
    assert (None if row is None or row.newest_batch is None else (row.oldest_batch, row.newest_batch)) == expected


@pytest.mark.parametrize("fixture", ["windowed_agg_file_sink", "file_source_dedup", "stream_stream_join"])
def test_sink_log_row_counts_the_files_of_spark_metadata(fixture):
    log_dir = OUR_FIXTURES / fixture / "output" / "_spark_metadata"
    names = os.listdir(log_dir)
    batches = [int(name.removesuffix(".compact")) for name in names if not name.startswith(".")]
    rows = take_inventory(
        CheckpointStorage(str(OUR_FIXTURES / fixture / "checkpoint")),
        sink_log=CheckpointStorage(str(OUR_FIXTURES / fixture / "output")),
    )
    sink = rows[-1]
    assert (sink.kind, sink.path) == ("sink-log", f"file://{log_dir}")
    assert (sink.files, sink.bytes) == (len(names), sum(os.path.getsize(log_dir / name) for name in names))
    assert (sink.oldest_batch, sink.newest_batch, sink.list_requests) == (min(batches), max(batches), 1)


# State versions from the file names: HDFS N.delta / N.snapshot, RocksDB N.zip / N.changelog and,
# with checkpoint format 2, N_<uuid>.zip / .changelog. Version V is written by batch V - 1.
STATE_BATCHES = [
    ("windowed_agg_file_sink", (5, 11)),  # 6.delta ... 12.snapshot
    ("killed_mid_batch", (2, 6)),  # 3.delta ... 7.delta (batch 6 wrote state, then was killed)
    ("rocksdb_changelog_agg", (9, 11)),  # 10.zip ... 12.zip
    ("rocksdb_checkpoint_v2_dedup", (7, 11)),  # 8_<uuid>.zip ... 12_<uuid>.changelog
]


@pytest.mark.parametrize(("fixture", "batches"), STATE_BATCHES, ids=[f for f, _ in STATE_BATCHES])
def test_state_row_spans_the_batches_that_wrote_the_versions_kept(fixture, batches):
    rows = _rows_by_path(take_inventory(CheckpointStorage(str(OUR_FIXTURES / fixture / "checkpoint"))))
    assert (rows["state/0"].oldest_batch, rows["state/0"].newest_batch) == batches


def test_join_state_is_one_row_for_its_four_stores_and_two_partitions():
    checkpoint = OUR_FIXTURES / "stream_stream_join" / "checkpoint"
    rows = [row for row in take_inventory(CheckpointStorage(str(checkpoint))) if row.kind == "state"]
    # state/0, its _metadata, 2 partitions, 4 stores each, each with a _metadata in partition 0.
    assert [(row.path, row.list_requests) for row in rows] == [("state/0", 1 + 1 + 2 + 8 + 4)]


def _listing(directories: dict[str, list[tuple[str, int]]]) -> TreeListing:
    """A hand-made listing: names ending in '/' are directories."""
    return TreeListing(
        {
            dirname: tuple(FileInfo(name.rstrip("/"), size, None, name.endswith("/")) for name, size in entries)
            for dirname, entries in directories.items()
        }
    )


def test_a_directory_of_2500_keys_costs_three_list_pages():
    listing = _listing({"": [("offsets/", 0)], "offsets": [(str(i), 500) for i in range(2500)]})
    offsets = _rows_by_path(build_inventory(listing))["offsets"]
    assert (offsets.files, offsets.list_requests, offsets.get_requests) == (2500, 3, 2500)
    assert (offsets.oldest_batch, offsets.newest_batch) == (0, 2499)


def test_checksums_and_temporary_files_are_counted_but_never_opened():
    names = [("7", 300), (".7.crc", 12), (".8.1f0a1e22-1234-4567-89ab-0123456789ab.tmp", 300)]
    listing = _listing({"": [("commits/", 0)], "commits": names})
    commits = _rows_by_path(build_inventory(listing))["commits"]
    assert (commits.files, commits.bytes, commits.get_requests, commits.small_files) == (3, 612, 1, 1)
    assert (commits.oldest_batch, commits.newest_batch) == (7, 7)


def test_small_files_are_those_under_4_kib():
    sizes = [SMALL_FILE_BYTES - 1, SMALL_FILE_BYTES, 0, 10**6]
    listing = _listing(
        {"": [("sources/", 0)], "sources": [("0/", 0)], "sources/0": [(str(i), s) for i, s in enumerate(sizes)]}
    )
    rows = _rows_by_path(build_inventory(listing))
    assert (rows["sources/0"].small_files, rows["sources/0"].list_requests) == (2, 1)


def test_root_row_carries_the_listings_that_find_the_other_rows():
    listing = _listing(
        {
            "": [("metadata", 45), ("state/", 0), ("sources/", 0), ("README", 10)],
            "state": [("0/", 0), ("1/", 0)],
            "state/0": [],
            "state/1": [("0/", 0)],
            "state/1/0": [("1.delta", 46)],
            "sources": [],
        }
    )
    rows = build_inventory(listing)
    assert [(r.path, r.kind, r.files, r.list_requests) for r in rows] == [
        ("metadata", "metadata", 1, 3),
        ("state/0", "state", 0, 1),
        ("state/1", "state", 1, 2),
        ("README", "other", 1, 0),
    ]
    assert (rows[2].oldest_batch, rows[2].newest_batch) == (0, 0)


def test_a_missing_checkpoint_is_one_empty_root_row(tmp_path):
    rows = take_inventory(CheckpointStorage(str(tmp_path / "absent")))
    assert rows == [DirectoryInventory("metadata", "metadata", 0, 0, 0, None, None, 1, 0)]
