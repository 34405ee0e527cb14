"""State figures followed batch by batch equal Spark's `statestore` reader and a cold read.

A real PySpark windowed aggregation (windows evicted by the watermark: removals in every delta
or changelog) runs a few batches at a time, on HDFS-backed and on RocksDB (changelog
checkpointing) state. After each run a sync follows the new batches from the key sets it keeps;
every partition's rows must then equal what Spark's own reader returns at the newest committed
batch, and the key set of a cold read of that version.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from django.utils import timezone
from pyspark.sql import functions as F

from dashboards.models import Checkpoint, SyncRun
from factories import make_checkpoint
from pipelines.generate_fixtures import RATE, ROCKSDB_CHANGELOG_CONF, session_conf
from pipelines.queries import stop_between_batches, windowed_agg_noop_query
from workers.checkpoint.logdir import list_batch_ids
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.statefollow import read_state_keys
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statekeys import parse_state_keys
from workers.checkpoint.statesummary import StateConf
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.state_follow import keys_path
from workers.state_partitions import VERSION_FIGURES
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.spark, pytest.mark.django_db]

# Snapshots (zips) every 2 versions, so that the followed versions cross some.
COMMON_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
}
PROVIDERS = {
    "hdfs": {
        "spark.sql.streaming.stateStore.providerClass": (
            "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
        )
    },
    "rocksdb": ROCKSDB_CHANGELOG_CONF,
}
FIRST_BATCHES = 3
STEPS = 3
WAIT_SECONDS = 240


def _run_until(spark, base: Path, conf: dict[str, str], batch_id: int) -> None:
    """Run the query (again) until it has committed ``batch_id``, then stop it between batches."""
    with session_conf(spark, {**COMMON_CONF, **conf}):
        query = windowed_agg_noop_query(spark, base, base.name, RATE).trigger(processingTime="1 second").start()
        try:
            deadline = time.monotonic() + WAIT_SECONDS
            while (query.lastProgress or {}).get("batchId", -1) < batch_id:
                assert query.exception() is None, query.exception()
                assert time.monotonic() < deadline, f"the query did not commit batch {batch_id} in {WAIT_SECONDS} s"
                time.sleep(0.05)
        finally:
            stop_between_batches(query, timeout_seconds=30)


def _spark_counts(spark, checkpoint: Path, batch_id: int) -> dict[int, int]:
    frame = spark.read.format("statestore").option("batchId", batch_id).load(str(checkpoint))
    return {
        row["partition_id"]: row["count"]
        for row in frame.groupBy("partition_id").agg(F.count("*").alias("count")).collect()
    }


def _cold_rows(checkpoint: Path, version: int) -> dict[int, int]:
    storage = CheckpointStorage(str(checkpoint))
    conf = StateConf("lz4", False)
    return {
        store.partition: read_state_keys(storage, store, version, conf=conf).rows
        for store in list_state_store_dirs(storage)
    }


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_followed_rows_equal_sparks_reader_and_a_cold_read_after_each_new_batch(spark, tmp_path, settings, provider):
    settings.CHECKPOINT_ROOTS = [str(tmp_path)]
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    settings.FULL_WALK_INTERVAL_SECONDS = settings.INSPECT_INTERVAL_SECONDS = (
        24 * 3600
    )  # the full walk runs on the first sync only,
    settings.RECONCILE_INTERVAL_SECONDS = 24 * 3600  # the later syncs are probes
    base = tmp_path / provider
    checkpoint_dir = base / "checkpoint"
    _run_until(spark, base, PROVIDERS[provider], FIRST_BATCHES - 1)
    checkpoint = make_checkpoint(name=provider, url=str(checkpoint_dir))
    sync_checkpoint(checkpoint.pk)

    for step in range(STEPS):
        newest_before = list_batch_ids(CheckpointStorage(str(checkpoint_dir)), "commits")[-1]
        _run_until(spark, base, PROVIDERS[provider], newest_before + 1)
        run = sync_checkpoint(checkpoint.pk)
        newest = list_batch_ids(CheckpointStorage(str(checkpoint_dir)), "commits")[-1]

        assert run.status == SyncRun.Status.OK and run.new_commits >= 1, (step, run.message)
        # The first follow reads cold (no key set kept yet) and lists; the next ones read new files only.
        assert (run.list_calls == 0) == (step > 0), (step, run.list_calls)
        rows = list(checkpoint.state_partitions.order_by("partition"))
        assert [(row.rows_version, row.note, row.provider) for row in rows] == [(newest + 1, "", provider)] * 2, step
        theirs = _spark_counts(spark, checkpoint_dir, newest)
        assert {row.partition: row.rows for row in rows} == {p: theirs.get(p, 0) for p in (0, 1)}, step
        assert {row.partition: row.rows for row in rows} == _cold_rows(checkpoint_dir, newest + 1), step
        for row in rows:
            kept = parse_state_keys(keys_path(checkpoint, row).read_bytes(), source="kept")
            assert (kept.version, kept.rows) == (newest + 1, row.rows)
    assert sum(row.rows for row in rows) > 0


# Spark's maintenance keeps the last 2 versions' files: old versions go while the test watches.
CLEANING_CONF = {**PROVIDERS["hdfs"], "spark.sql.streaming.minBatchesToRetain": "2"}
CLEANUP_WAIT_SECONDS = 300
BATCHES_PER_RUN = 5


def _as_of_line(client, checkpoint) -> str:
    page = client.get(checkpoint.get_absolute_url()).content.decode()
    start = page.index('id="state-as-of"')
    return " ".join(page[page.index(">", start) + 1 : page.index("</p>", start)].split())


def _decode_sample(client, partition, capture):
    from django.urls import reverse

    with capture(execute=True):
        client.post(reverse("dashboards:state-partition-sample", args=[partition.checkpoint_id, partition.pk]))
    return partition.samples.order_by("-pk").first()


def test_the_state_panel_and_samples_follow_a_query_past_sparks_cleanup_and_a_copy_keeps_its_own(
    spark, tmp_path, settings, viewer_client, eager_celery, django_capture_on_commit_callbacks
):
    settings.CHECKPOINT_ROOTS = [str(tmp_path)]
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    base = tmp_path / "live"
    _run_until(spark, base, CLEANING_CONF, FIRST_BATCHES - 1)
    # The trigger is given, as for a query one knows: a probe behind Spark's purge follows it.
    live = make_checkpoint(name="live", url=str(base / "checkpoint"), expected_trigger_seconds=1)
    sync_checkpoint(live.pk)
    # A copy of the checkpoint as it stands now (a backup restored beside it): same query id.
    shutil.copytree(base / "checkpoint", tmp_path / "copy" / "checkpoint")
    copy = make_checkpoint(name="copy", url=str(tmp_path / "copy" / "checkpoint"))
    sync_checkpoint(copy.pk)
    # The query may have committed a batch more than asked before it stopped: read where it did.
    copied = list_batch_ids(CheckpointStorage(str(tmp_path / "copy" / "checkpoint")), "commits")[-1]
    first_version = copied + 1  # batch N commits version N + 1

    # The dashboard syncs as the query goes (Spark purges offsets and commits older than 2 batches
    # too), until Spark's maintenance has removed the version the first sync showed.
    # When Spark's maintenance thread runs depends on the machine's speed: the test waits for the
    # deletion it needs (bounded), running five batches a run: on a fast idle machine a shorter run
    # stopped before the thread (every maintenanceInterval, 1 s) had snapshotted and cleaned.
    first_files = base / "checkpoint" / "state" / "0" / "0"
    deadline = time.monotonic() + CLEANUP_WAIT_SECONDS
    while list(first_files.glob(f"{first_version}.*")) and time.monotonic() < deadline:
        newest = list_batch_ids(CheckpointStorage(str(base / "checkpoint")), "commits")[-1]
        _run_until(spark, base, CLEANING_CONF, newest + BATCHES_PER_RUN)
        run = sync_checkpoint(live.pk)
        assert run.new_commits >= 1, (run.kind, run.message, newest)
        sync_checkpoint(copy.pk)
    assert not list(first_files.glob(f"{first_version}.*")), (
        f"Spark kept version {first_version} for {CLEANUP_WAIT_SECONDS} s of batches"
    )
    newest = list_batch_ids(CheckpointStorage(str(base / "checkpoint")), "commits")[-1]
    partitions = list(live.state_partitions.order_by("partition"))
    assert {p.rows_version for p in partitions} == {newest + 1}
    theirs = _spark_counts(spark, base / "checkpoint", newest)
    assert {p.partition: p.rows for p in partitions} == {p: theirs.get(p, 0) for p in (0, 1)}
    assert _as_of_line(viewer_client, live).startswith(f"As of batch {newest} (state version {newest + 1}), read ")
    partition = max(partitions, key=lambda p: p.rows)
    sample = _decode_sample(viewer_client, partition, django_capture_on_commit_callbacks)
    assert (sample.error, sample.note, sample.version) == ("", "", newest + 1)
    assert len(sample.rows) == min(partition.rows, 50)

    # The copy stopped at batch ``copied``: its figures stay its own.
    copy_partitions = list(copy.state_partitions.order_by("partition"))
    assert {p.rows_version for p in copy_partitions} == {first_version}
    ours = _spark_counts(spark, tmp_path / "copy" / "checkpoint", copied)
    assert {p.partition: p.rows for p in copy_partitions} == {p: ours.get(p, 0) for p in (0, 1)}
    copy_line = _as_of_line(viewer_client, copy)
    assert copy_line.startswith(f"As of batch {copied} (state version {first_version}), read ")
    assert "behind" not in copy_line
    copy_sample = _decode_sample(
        viewer_client, max(copy_partitions, key=lambda p: p.rows), django_capture_on_commit_callbacks
    )
    assert (copy_sample.error, copy_sample.version) == ("", first_version)


def test_a_sync_that_fell_behind_sparks_log_purge_catches_up_at_once(spark, tmp_path, settings):
    settings.CHECKPOINT_ROOTS = [str(tmp_path)]
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    base = tmp_path / "behind"
    checkpoint_dir = base / "checkpoint"
    _run_until(spark, base, CLEANING_CONF, FIRST_BATCHES - 1)
    # The trigger is given, as for a query one knows: the probe's look for a purge follows it.
    checkpoint = make_checkpoint(name="behind", url=str(checkpoint_dir), expected_trigger_seconds=1)
    sync_checkpoint(checkpoint.pk)
    stored = Checkpoint.objects.get(pk=checkpoint.pk).latest_batch_id
    # No sync while the query runs 6 batches: Spark purges the offsets file the next probe would read.
    _run_until(spark, base, CLEANING_CONF, stored + 6)
    offset_ids = list_batch_ids(CheckpointStorage(str(checkpoint_dir)), "offsets")
    assert offset_ids[0] > stored + 1, offset_ids

    caught_up = sync_checkpoint(checkpoint.pk)  # neither the full pass nor the hourly reconcile is due

    checkpoint.refresh_from_db()
    newest = list_batch_ids(CheckpointStorage(str(checkpoint_dir)), "commits")[-1]
    assert caught_up.kind == SyncRun.Kind.RECONCILE and caught_up.status == SyncRun.Status.OK
    assert (checkpoint.latest_batch_id, checkpoint.latest_committed_batch_id) == (offset_ids[-1], newest)
    assert {p.rows_version for p in checkpoint.state_partitions.all()} == {newest + 1}


# Spark's maintenance thread kept away: it starts once per JVM and snapshots on its own clock (in two
# full serial runs it wrote no snapshot in 300 s of batches, though the file alone passed). The test
# writes the snapshot maintenance would write, `<v>.snapshot` of the newest version, with ckptweb's
# snapshot action (the file Spark reads back and restarts from: test_maintenance_state_vs_spark.py).
QUIET_CONF = {**PROVIDERS["hdfs"], "spark.sql.streaming.stateStore.maintenanceInterval": "3600s"}
SNAPSHOTTED_BATCHES = 5


def _write_snapshot_as_maintenance_does(checkpoint_dir: Path, version: int) -> None:
    storage = CheckpointStorage(str(checkpoint_dir))
    request = {"min_chain": 2, "version": version}
    plan = plan_action("snapshot", storage, request, now=time.time() + 1, quiet_seconds=0)
    assert plan.is_allowed() and not plan.is_empty, (plan.summary, plan.failed_preconditions())
    apply_action(storage, plan, request)


def _partition_cells(client, checkpoint) -> list[list[str]]:
    """The state panel's partition table, as the page shows it: one list of cell texts a row."""
    import re

    page = client.get(checkpoint.get_absolute_url()).content.decode()
    table = page[page.index('id="state-partitions"') : page.index("</table>", page.index('id="state-partitions"'))]
    rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], flags=re.S)
    return [
        [" ".join(re.sub(r"<[^>]+>", "", cell).split()) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in rows
    ]


def test_a_snapshot_and_a_deleted_version_as_maintenance_leaves_them_reach_the_state_panel_without_a_full_walk(
    spark, tmp_path, settings, viewer_client
):
    settings.CHECKPOINT_ROOTS = [str(tmp_path)]
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    settings.FULL_WALK_INTERVAL_SECONDS = 24 * 3600  # the full walk runs on registration only
    settings.INSPECT_INTERVAL_SECONDS = 0  # every sync probes
    base = tmp_path / "maintained"
    _run_until(spark, base, QUIET_CONF, SNAPSHOTTED_BATCHES - 1)
    checkpoint_dir = base / "checkpoint"
    store = checkpoint_dir / "state" / "0" / "0"
    written = list_batch_ids(CheckpointStorage(str(checkpoint_dir)), "commits")[-1] + 1
    # The walk at registration sees the store before maintenance snapshots it.
    checkpoint = make_checkpoint(name="maintained", url=str(checkpoint_dir))
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    walked_at, before = checkpoint.last_inspected_at, checkpoint.state_partitions.get(partition=0)
    assert before.snapshot_version != written and before.earliest_version is not None
    # Then maintenance writes the snapshot, and its cleanup deletes the oldest version (placed as
    # Spark does: the oldest version's files, which loading the newest no longer needs).
    _write_snapshot_as_maintenance_does(checkpoint_dir, written)
    assert (store / f"{written}.snapshot").is_file()
    oldest = before.earliest_version
    for path in store.glob(f"{oldest}.*"):
        path.unlink()

    run = sync_checkpoint(checkpoint.pk)  # no new batch: nothing to follow, only the probe

    checkpoint.refresh_from_db()
    assert run.status == SyncRun.Status.OK and checkpoint.last_inspected_at == walked_at, run.message
    after = checkpoint.state_partitions.get(partition=0)
    assert (after.snapshot_version, after.rows) == (written, before.rows)
    assert after.earliest_version > oldest
    cells = {row[0]: row for row in _partition_cells(viewer_client, checkpoint)}
    shown = cells[after.path]
    assert (shown[1], shown[2], shown[3]) == (str(after.latest_version), str(after.earliest_version), str(written))
    # What the probe followed is what a full walk finds.
    probed = list(
        checkpoint.state_partitions.order_by("partition").values_list(*VERSION_FIGURES, "rows", "rows_version")
    )
    Checkpoint.objects.filter(pk=checkpoint.pk).update(full_walk_requested_at=timezone.now())
    sync_checkpoint(checkpoint.pk)
    assert (
        list(checkpoint.state_partitions.order_by("partition").values_list(*VERSION_FIGURES, "rows", "rows_version"))
        == probed
    )
