"""Purging offsets and commits (maintenance/purge.py), HDFSMetadataLog.purge semantics.

Most tests write a checkpoint's logs here: the content of a PySpark-written offsets and commits
file for every batch, each with its Hadoop CRC, modified an hour ago (the query is stopped).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES
from maintenance_crash import apply_killed_at, count_steps
from workers.checkpoint.logdir import read_commit, read_offset_seq
from workers.checkpoint.maintenance.plan import plan_from_json, restrict_to_confirmed
from workers.checkpoint.maintenance.purge import apply_purge, plan_purge, purge_plan_from_listings
from workers.checkpoint.maintenance.sidecars import hadoop_crc_bytes
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

HOUR_AGO = time.time() - 3600
SPARK_OFFSETS = (OUR_FIXTURES / "windowed_agg_file_sink/checkpoint/offsets/8").read_bytes()
SPARK_COMMIT = (OUR_FIXTURES / "windowed_agg_file_sink/checkpoint/commits/8").read_bytes()


def write_logs(root: Path, offsets: range | list[int], commits: range | list[int], *, mtime: float = HOUR_AGO) -> Path:
    for log, ids, data in (("offsets", offsets, SPARK_OFFSETS), ("commits", commits, SPARK_COMMIT)):
        (root / log).mkdir(parents=True, exist_ok=True)
        for batch_id in ids:
            for path, content in (
                (root / log / str(batch_id), data),
                (root / log / f".{batch_id}.crc", hadoop_crc_bytes(data)),
            ):
                path.write_bytes(content)
                os.utime(path, (mtime, mtime))
    return root


def write_state_files(root: Path, store: str, names: list[str]) -> None:
    directory = root / "state" / store
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"x")


def batch_deletes(batch_ids) -> list[str]:
    """What purging ``batch_ids`` deletes, in the order the plan must give (written out independently)."""
    return [
        path
        for batch_id in batch_ids
        for path in (
            f"offsets/.{batch_id}.crc",
            f"offsets/{batch_id}",
            f"commits/.{batch_id}.crc",
            f"commits/{batch_id}",
        )
    ]


def purge(root: Path, **options):
    options.setdefault("now", time.time())
    storage = CheckpointStorage(str(root))
    return storage, plan_purge(storage, **options)


def names_in(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


# --- thresholds ---


def test_purge_keeps_the_last_committed_batches_and_deletes_the_older_ones_oldest_first(tmp_path):
    root = write_logs(tmp_path, range(10), range(9))  # batch 9 started, not committed
    _, plan = purge(root, keep_batches=3)
    # Latest committed 8, keep 3: 6, 7, 8 (and the uncommitted 9) stay, as Spark's purge(9 - 3) would leave.
    assert [d.path for d in plan.deletes] == batch_deletes(range(6))
    assert plan.is_allowed(), plan.preconditions
    assert plan.bytes_freed == sum((tmp_path / path).stat().st_size for path in batch_deletes(range(6)))


def test_keeping_one_batch_leaves_the_latest_commit_and_the_uncommitted_offsets(tmp_path):
    root = write_logs(tmp_path, range(10), range(9))
    storage, plan = purge(root, keep_batches=1)
    apply_purge(storage, plan)
    assert names_in(root / "offsets") == [8, 9]
    assert names_in(root / "commits") == [8]
    assert read_offset_seq(storage, 9).offsets == read_offset_seq(storage, 8).offsets
    assert read_commit(storage, 8).version == 1


def test_a_restart_needs_the_offsets_before_the_latest_so_two_batches_stay_at_least(tmp_path):
    root = write_logs(tmp_path, range(10), range(10))  # every batch committed
    storage, plan = purge(root, keep_batches=1)
    # MicroBatchExecution reads offsets/8 to restart from batch 9 ("batch 8 doesn't exist" otherwise).
    assert [d.path for d in plan.deletes] == batch_deletes(range(8))
    apply_purge(storage, plan)
    assert names_in(root / "offsets") == names_in(root / "commits") == [8, 9]


def test_the_oldest_state_version_on_disk_keeps_the_batch_that_wrote_it(tmp_path):
    root = write_logs(tmp_path, range(10), range(10))
    write_state_files(root, "0/0", ["4.delta", "5.delta", "5.snapshot", "6.delta", ".4.delta.crc"])
    write_state_files(root, "0/1", ["6.delta", "7.delta"])
    _, plan = purge(root, keep_batches=1)
    # Version 4 is read with batch 3's offsets and commits.
    assert [d.path for d in plan.deletes] == batch_deletes(range(3))
    assert any("state version 4" in note for note in plan.notes)


def test_a_rocksdb_store_s_oldest_version_counts_too(tmp_path):
    root = write_logs(tmp_path, range(10), range(10))
    write_state_files(root, "0/0", ["6.zip", "7.changelog"])
    write_state_files(root, "0/0/SSTs", ["000001-0c3d4b53-3f7f-4a59-9c41-6b2a2b8c1c1a.sst"])
    write_state_files(root, "1/0", ["2.changelog", "3.changelog", "4.zip"])
    _, plan = purge(root, keep_batches=1)
    assert [d.path for d in plan.deletes] == batch_deletes(range(1))


def test_before_batch_bounds_the_purge_when_it_is_lower(tmp_path):
    root = write_logs(tmp_path, range(10), range(10))
    _, plan = purge(root, keep_batches=2, before_batch=4)
    assert [d.path for d in plan.deletes] == batch_deletes(range(4))
    _, plan = purge(root, keep_batches=3, before_batch=50)
    assert [d.path for d in plan.deletes] == batch_deletes(range(7))


def test_spark_s_default_of_100_batches_purges_nothing_from_a_short_log(tmp_path):
    root = write_logs(tmp_path, range(10), range(10))
    _, plan = purge(root)
    assert plan.is_empty and plan.summary.startswith("nothing to purge")


def test_a_checkpoint_without_a_commit_has_nothing_to_purge(tmp_path):
    root = write_logs(tmp_path, [0], [])
    _, plan = purge(root, keep_batches=1)
    assert plan.is_empty and "no batch is committed" in plan.summary


def test_keep_batches_below_one_is_refused():
    with pytest.raises(ValueError, match="keep_batches"):
        purge_plan_from_listings([], [], oldest_state_version=None, keep_batches=0, now=0.0)


# --- preconditions ---


def test_a_query_that_wrote_a_batch_recently_fails_query_stopped(tmp_path):
    root = write_logs(tmp_path, range(5), range(5), mtime=time.time())
    _, plan = purge(root, keep_batches=1)
    assert [p.name for p in plan.failed_preconditions()] == ["query-stopped"]
    assert plan.is_allowed(overrides={"query-stopped"})


def test_a_batch_dated_after_the_storages_clock_makes_the_time_since_the_last_batch_unknown(tmp_path):
    # A writer that stamps its own files (a client over NFS, a copy that kept its times) an hour ahead.
    root = write_logs(tmp_path, range(5), range(4))
    write_logs(tmp_path, [], [4], mtime=time.time() + 3600)
    _, plan = purge(root, keep_batches=1, now=time.time())
    [failed] = plan.failed_preconditions()
    assert failed.name == "query-stopped" and failed.detail.startswith("commits/")  # batch 4's commit or its CRC
    assert "is dated 3600 s after the storage's clock" in failed.detail


def test_a_hole_that_was_already_there_is_reported_but_not_blamed_on_the_plan(tmp_path):
    root = write_logs(tmp_path, [0, 1, 2, 3, 4, 5, 7], range(8))
    _, plan = purge(root, keep_batches=3)
    contiguity = next(p for p in plan.preconditions if p.name == "contiguity")
    assert contiguity.ok and "offsets already lacks batch 6" in contiguity.detail
    assert [d.path for d in plan.deletes][:2] == ["offsets/.0.crc", "offsets/0"]


def test_the_compactible_logs_are_never_purged(tmp_path):
    query = tmp_path / "q"
    shutil.copytree(OUR_FIXTURES / "file_source_dedup/checkpoint", query, copy_function=shutil.copyfile)
    shutil.rmtree(query / "state")
    _, plan = purge(query, keep_batches=1, now=time.time() + 3600)
    assert plan.deletes and all(d.path.split("/")[0] in ("offsets", "commits") for d in plan.deletes)


def test_on_a_spark_checkpoint_the_retained_state_versions_bind(tmp_path):
    query = tmp_path / "q"
    shutil.copytree(OUR_FIXTURES / "killed_mid_batch/checkpoint", query, copy_function=shutil.copyfile)
    versions = [
        int(p.name.split(".")[0])
        for p in (query / "state").rglob("*")
        if p.name[0].isdigit() and p.suffix in (".delta", ".snapshot")
    ]
    _, plan = purge(query, keep_batches=1, now=time.time() + 3600)
    # Spark kept offsets from batch 3 on; the oldest state version it kept needs batch min - 1.
    assert min(versions) - 1 <= 3 and plan.is_empty
    assert plan.summary.startswith(
        "nothing to purge: batch 3, the oldest stored, is still needed: "
        f"state version {min(versions)} is still on disk "
        f"and is read with batch {min(versions) - 1}'s offsets and commits"
    )


# --- crash safety ---


# Offsets 0..6, commits 0..5, keep 2: batches 0..3 go, 4 files each, then "done".
CRASH_STEPS = 4 * 4 + 1


def test_the_crash_scenario_has_the_expected_number_of_steps(tmp_path):
    storage, plan = purge(write_logs(tmp_path, range(7), range(6)), keep_batches=2)
    assert count_steps(apply_purge, storage.url, plan) == CRASH_STEPS


@pytest.mark.parametrize("kill_at", range(CRASH_STEPS))
def test_a_purge_killed_at_any_step_leaves_contiguous_logs_and_a_rerun_completes_it(tmp_path, kill_at):
    root = write_logs(tmp_path, range(7), range(6))
    storage, confirmed = purge(root, keep_batches=2)

    assert apply_killed_at(apply_purge, storage.url, confirmed, kill_at) == -signal.SIGKILL
    for log, last in (("offsets", 6), ("commits", 5)):
        ids = names_in(root / log)
        assert ids == list(range(ids[0], last + 1)), f"{log} keeps a contiguous suffix"
        crcs = sorted(int(p.name[1:-4]) for p in (root / log).iterdir() if p.name.startswith("."))
        assert len(set(ids) - set(crcs)) <= 1, "a CRC goes right before its file, never earlier"
    read_offset_seq(storage, 6)
    read_commit(storage, 5)

    _, fresh = purge(root, keep_batches=2)
    rest, _ = restrict_to_confirmed(confirmed, fresh)
    apply_purge(storage, rest)
    assert names_in(root / "offsets") == [4, 5, 6]
    assert names_in(root / "commits") == [4, 5]
    assert sorted(p.name for p in (root / "commits").iterdir()) == [".4.crc", ".5.crc", "4", "5"]


def test_the_plan_survives_a_json_round_trip(tmp_path):
    _, plan = purge(write_logs(tmp_path, range(10), range(9)), keep_batches=3)
    assert plan_from_json(json.loads(json.dumps(plan.as_json()))) == plan
