"""The versions bench/state_rows.py measures "snapshot only" and "snapshot + deltas" at, on file
listings shaped like the ones Spark's maintenance leaves (the Spark-written case is
tests/spark/test_staterows_fast_vs_spark.py, where which shape occurs depends on timing)."""

from __future__ import annotations

import pytest

from bench.state_rows import PARTITIONS, missing_snapshot_cases, snapshot_and_deltas_versions, snapshot_only_versions


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


def test_without_a_common_version_each_partition_is_measured_at_its_own_newest_snapshot(tmp_path):
    # Maintenance reached partitions 0-3 before batch 4 committed and 4-7 after it (a CI run saw
    # two partitions stay a version off for 90 versions): each loads its snapshot alone at its own
    # version, and Spark is read at each version for its partitions.
    files = {p: ["3.delta", "4.delta", "4.snapshot" if p < 4 else "5.snapshot", "5.delta"] for p in range(PARTITIONS)}
    files[0] = ["2.snapshot", *files[0]]
    expected = {p: 4 if p < 4 else 5 for p in range(PARTITIONS)}
    assert snapshot_only_versions(_checkpoint(tmp_path, 6, files)) == expected


def test_a_snapshot_past_the_last_commit_is_not_measured(tmp_path):
    files = {p: ["2.snapshot", "3.delta", "4.snapshot"] for p in range(PARTITIONS)}
    assert snapshot_only_versions(_checkpoint(tmp_path, 3, files)) == dict.fromkeys(range(PARTITIONS), 2)


def test_a_partition_without_a_snapshot_is_named(tmp_path):
    files = {p: ["2.delta", "2.snapshot"] for p in range(PARTITIONS) if p not in (2, 7)}
    with pytest.raises(LookupError, match=r"no version up to 3 with a snapshot in every partition .*2: \[\]"):
        snapshot_only_versions(_checkpoint(tmp_path, 3, files))


def test_snapshot_and_deltas_skip_a_latest_version_that_one_partition_loads_from_its_snapshot_alone(tmp_path):
    files = {p: ["2.delta", "2.snapshot", "3.delta", "4.delta", "5.delta"] for p in range(PARTITIONS)}
    files[6] = ["2.delta", "2.snapshot", "3.delta", "4.delta", "5.delta", "5.snapshot"]
    assert snapshot_and_deltas_versions(_checkpoint(tmp_path, 5, files)) == dict.fromkeys(range(PARTITIONS), 4)


def test_snapshot_and_deltas_stop_when_no_version_loads_a_snapshot_plus_deltas_everywhere(tmp_path):
    files = {p: ["1.delta", "2.delta", "2.snapshot"] for p in range(PARTITIONS)}
    files[3] = ["1.delta", "1.snapshot", "2.delta"]
    with pytest.raises(LookupError, match="no version up to 2 that every partition loads from a snapshot plus deltas"):
        snapshot_and_deltas_versions(_checkpoint(tmp_path, 2, files))


def test_a_state_with_both_snapshot_cases_is_ready_to_measure(tmp_path):
    files = {p: ["1.delta", "2.delta", "2.snapshot", "3.delta"] for p in range(PARTITIONS)}
    assert missing_snapshot_cases(_checkpoint(tmp_path, 3, files)) == []
