"""workers.checkpoint.statesummary on real fixtures: chains, restart version, limits, unknowns."""

from __future__ import annotations

import json
import shutil

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint.statesummary import (
    StatePartitionSummary,
    read_checkpoint_state,
    state_conf,
    summarize_stores,
)
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

KILLED = OUR_FIXTURES / "killed_mid_batch" / "checkpoint"


def test_rows_are_counted_at_the_version_a_restart_loads_not_the_newest_file():
    # Batch 6 was killed after writing state version 7; a restart re-runs it from version 6.
    partitions = read_checkpoint_state(CheckpointStorage(str(KILLED)))
    assert {p.rows_version for p in partitions} == {6}
    report = json.loads((KILLED.parent / "spark-report.json").read_text())
    batch_5 = next(p for p in report["progress"] if p["batchId"] == 5)
    assert sum(p.rows for p in partitions) == batch_5["stateOperators"][0]["numRowsTotal"]


def test_every_figure_of_a_killed_batchs_store_is_at_the_committed_version_and_its_files_are_uncommitted(tmp_path):
    # Spark wrote 6.snapshot and 7.delta in both partitions; commits/ ends at batch 5, whose
    # commit means version 6. Partition 1 loses its 7.delta, as when the kill came between the
    # two partitions' writes.
    killed = tmp_path / "checkpoint"
    shutil.copytree(KILLED, killed, copy_function=shutil.copyfile)
    (killed / "state/0/1/7.delta").unlink()
    partitions = {p.partition: p for p in read_checkpoint_state(CheckpointStorage(str(killed)))}
    snapshot_6 = {n: (killed / f"state/0/{n}/6.snapshot").stat().st_size for n in (0, 1)}
    for number, partition in partitions.items():
        assert (partition.latest_version, partition.snapshot_version, partition.delta_chain) == (6, 6, 0)
        assert (partition.load_files, partition.load_bytes) == (1, snapshot_6[number])
        assert partition.rows_version == 6
    assert partitions[0].uncommitted_versions == (7,)
    assert partitions[1].uncommitted_versions == ()
    (store,) = summarize_stores(partitions.values())
    assert (store.latest_version, store.max_delta_chain, store.uncommitted_versions) == (6, 0, (7,))


def test_a_rocksdb_store_past_its_newest_commit_is_figured_at_the_committed_version(tmp_path):
    # Spark writes a batch's changelog (and maybe a zip) before its commit: without commits/11,
    # version 12's files belong to a batch a restart runs again.
    checkpoint = tmp_path / "checkpoint"
    shutil.copytree(OUR_FIXTURES / "rocksdb_changelog_agg" / "checkpoint", checkpoint, copy_function=shutil.copyfile)
    (checkpoint / "commits/11").unlink()
    partitions = read_checkpoint_state(CheckpointStorage(str(checkpoint)))
    committed_files = {p.partition: sorted((checkpoint / p.path).glob("1[01].*")) for p in partitions}
    for partition in partitions:
        assert partition.latest_version == 11 and partition.rows_version == 11
        assert partition.uncommitted_versions == (12,)
        assert partition.snapshot_version == 10 and partition.delta_chain == 1
        assert [name.name for name in committed_files[partition.partition]] == [
            "10.changelog",
            "10.zip",
            "11.changelog",
        ]


def test_a_store_larger_than_the_read_limit_is_not_counted_and_says_why():
    partitions = read_checkpoint_state(CheckpointStorage(str(KILLED)), max_read_bytes=10)
    assert {p.rows for p in partitions} == {None}
    assert all(p.note.startswith("not counted: version 6 needs") for p in partitions)


def test_without_a_commit_log_nothing_is_counted():
    partitions = read_checkpoint_state(CheckpointStorage(str(SPARK_TEST_RESOURCES / "checkpoint-version-2.1.0")))
    assert partitions and {(p.rows, p.note) for p in partitions} == {(None, "no committed batch")}


def test_a_store_total_is_unknown_when_one_partition_is():
    known = StatePartitionSummary(0, 0, "default", "hdfs", "state/0/0", 3, None, 3, 100, 5, 3)
    unknown = StatePartitionSummary(0, 1, "default", "hdfs", "state/0/1", 4, 2, 2, 50, None, None, "damaged")
    [total] = summarize_stores([known, unknown])
    assert (total.partitions, total.latest_version, total.rows, total.bytes_on_disk, total.max_delta_chain) == (
        2,
        4,
        None,
        150,
        3,
    )


def test_the_pinned_conf_decides_codec_and_row_checksums():
    assert state_conf({}) == state_conf({"spark.sql.streaming.stateStore.rowChecksum.enabled": "false"})
    conf = state_conf(
        {
            "spark.sql.streaming.stateStore.compression.codec": "zstd",
            "spark.sql.streaming.stateStore.rowChecksum.enabled": "true",
        }
    )
    assert (conf.codec, conf.row_checksum) == ("zstd", True)


def test_the_restart_cost_is_the_snapshot_and_the_deltas_after_it():
    partitions = read_checkpoint_state(CheckpointStorage(str(KILLED)))
    for partition in partitions:
        directory = KILLED / partition.path
        snapshots = sorted(int(p.name.split(".")[0]) for p in directory.glob("*.snapshot"))
        base = max(v for v in snapshots if v <= partition.latest_version)
        chain = [directory / f"{base}.snapshot"] + [
            directory / f"{v}.delta" for v in range(base + 1, partition.latest_version + 1)
        ]
        assert (partition.load_files, partition.load_bytes) == (len(chain), sum(p.stat().st_size for p in chain))
        assert partition.delta_chain == len(chain) - 1
