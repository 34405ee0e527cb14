"""The versions bench/state_rows.py measures "snapshot only" at, on file listings shaped like the ones
Spark's maintenance leaves (the Spark-written case is tests/spark/test_staterows_fast_vs_spark.py,
where which shape occurs depends on timing)."""

from __future__ import annotations

import pytest

from bench.state_rows import PARTITIONS, partitions_by_version, snapshot_only_versions


def _checkpoint(root, committed_batches: int, files_by_partition: dict[int, list[str]]):
    (root / "commits").mkdir(parents=True)
    for batch_id in range(committed_batches):
        (root / "commits" / str(batch_id)).write_bytes(b"v1\n{}")
    for partition in range(PARTITIONS):
        directory = root / "state" / "0" / str(partition)
        directory.mkdir(parents=True)
        for name in files_by_partition.get(partition, []) or [f"{v}.delta" for v in range(1, committed_batches + 1)]:
            (directory / name).write_bytes(b"")
    return root


def test_a_snapshot_version_common_to_all_partitions_is_measured_in_all(tmp_path):
    files = {p: ["1.delta", "2.delta", "3.delta", "3.snapshot", "4.delta", "6.snapshot"] for p in range(PARTITIONS)}
    files[5] = ["1.delta", "2.delta", "3.delta", "3.snapshot", "4.delta"]
    assert snapshot_only_versions(_checkpoint(tmp_path, 6, files)) == dict.fromkeys(range(PARTITIONS), 3)


def test_without_a_common_version_each_partition_is_measured_at_its_newest_snapshot(tmp_path):
    # Maintenance reached partitions 0-3 before batch 4 committed and 4-7 after it.
    files = {p: ["3.delta", "4.delta", "4.snapshot" if p < 4 else "5.snapshot", "5.delta"] for p in range(PARTITIONS)}
    versions = snapshot_only_versions(_checkpoint(tmp_path, 6, files))
    assert partitions_by_version(versions) == {4: [0, 1, 2, 3], 5: [4, 5, 6, 7]}


def test_a_snapshot_past_the_last_commit_is_not_measured(tmp_path):
    files = {p: ["2.snapshot", "3.delta", "4.snapshot"] for p in range(PARTITIONS)}
    assert snapshot_only_versions(_checkpoint(tmp_path, 3, files)) == dict.fromkeys(range(PARTITIONS), 2)


def test_a_partition_without_a_snapshot_is_named(tmp_path):
    files = {p: ["2.delta", "2.snapshot"] for p in range(PARTITIONS) if p not in (2, 7)}
    with pytest.raises(LookupError, match=r"no snapshot up to version 3 in partitions \[2, 7\]"):
        snapshot_only_versions(_checkpoint(tmp_path, 3, files))
