"""The full walk a sync runs every FULL_WALK_INTERVAL_SECONDS: compactible logs, kept compact-file history.

Expected figures were worked out by hand from the fixture files and agree with what Spark's own
FileStreamSourceLog / FileStreamSinkLog read (tests/spark/test_metadata_logs_vs_spark.py).
"""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from django.utils import timezone

from dashboards.models import Checkpoint, DirectoryInventory, Finding, MetadataLog, SyncRun
from factories import make_checkpoint, planned_at, write_sink_log
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

DEDUP = OUR_FIXTURES / "file_source_dedup"


@pytest.fixture
def dedup(copy_checkpoint):
    """A writable copy of the file-source fixture: `checkpoint/` and the sink's `output/`."""
    return copy_checkpoint(DEDUP)


def _logs(checkpoint: Checkpoint) -> list[tuple]:
    rows = MetadataLog.objects.filter(checkpoint=checkpoint).order_by("kind")
    return [
        (
            log.kind,
            log.compact_interval,
            log.latest_batch_id,
            log.live_entries,
            log.latest_compact_bytes,
            list(log.compact_files.values_list("batch_id", flat=True)),
        )
        for log in rows
    ]


def _resync_after_the_interval(checkpoint: Checkpoint, settings) -> None:
    later = timezone.now() + timedelta(seconds=settings.FULL_WALK_INTERVAL_SECONDS + 1)
    sync_checkpoint(checkpoint.pk, now=later)


def test_first_sync_reads_the_file_source_log_found_from_the_offsets(dedup):
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"))

    sync_checkpoint(checkpoint.pk)

    assert _logs(checkpoint) == [("source", 3, 7, 8, 698, [2, 5])]
    assert MetadataLog.objects.get(checkpoint=checkpoint).path == "sources/0"


def test_a_registered_sink_output_adds_its_log(dedup):
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"), sink_log_url=str(dedup / "output"))

    sync_checkpoint(checkpoint.pk)

    sink = MetadataLog.objects.get(checkpoint=checkpoint, kind="sink")
    assert sink.path == (dedup / "output" / "_spark_metadata").as_uri()
    assert (sink.compact_interval, sink.latest_batch_id, sink.next_compaction_batch_id) == (3, 15, 17)
    assert list(sink.compact_files.values_list("batch_id", "size_bytes")) == [
        (batch, (dedup / "output" / "_spark_metadata" / f"{batch}.compact").stat().st_size) for batch in (11, 14)
    ]


def test_compact_files_spark_deleted_stay_in_the_history(dedup, settings):
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    # Compaction batch 8 as Spark writes it (every entry so far), then deleteExpiredLog drops 2.compact.
    log = dedup / "checkpoint" / "sources" / "0"
    entries = [line for name in ("5.compact", "6", "7") for line in (log / name).read_bytes().split(b"\n")[1:]]
    (log / "8.compact").write_bytes(b"\n".join([b"v1", *entries]))
    (log / "2.compact").unlink()

    _resync_after_the_interval(checkpoint, settings)

    compact_8 = (log / "8.compact").stat().st_size
    assert _logs(checkpoint) == [("source", 3, 8, 8, compact_8, [2, 5, 8])]


def test_the_full_pass_records_the_newest_batch_its_walk_saw(dedup):
    # The query one batch short: batch 15's offsets and commit not written yet.
    for name in ("offsets/15", "offsets/.15.crc", "commits/15", "commits/.15.crc"):
        (dedup / "checkpoint" / name).unlink()
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"), sink_log_url=str(dedup / "output"))

    sync_checkpoint(checkpoint.pk)

    checkpoint.refresh_from_db()
    assert checkpoint.last_inspected_batch_id == 14
    assert set(checkpoint.metadata_logs.values_list("read_at_batch_id", flat=True)) == {14}
    assert set(DirectoryInventory.objects.latest_for(checkpoint).values_list("taken_at_batch_id", flat=True)) == {14}


def test_the_full_pass_waits_for_the_inspect_interval(dedup):
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"))
    first = sync_checkpoint(checkpoint.pk)
    second = sync_checkpoint(checkpoint.pk)

    # The first sync is a reconcile with the full pass: it walks every directory once (the
    # reconcile takes offsets/ and commits/ from that walk) and lists sources/0 again to read its
    # log. The second probes the next names and lists nothing.
    directories = sum(1 for _ in os.walk(dedup / "checkpoint"))
    assert (first.list_calls, second.list_calls) == (directories + 1, 0)


def test_an_unreadable_log_is_a_finding_until_it_reads_again(dedup, settings):
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    log_file = dedup / "checkpoint" / "sources" / "0" / "7"
    good = log_file.read_bytes()
    log_file.write_bytes(b"v1\n{not json")

    _resync_after_the_interval(checkpoint, settings)

    finding = Finding.objects.open().get(checkpoint=checkpoint)
    assert (finding.severity, finding.code, finding.path) == (Finding.Severity.ERROR, "file-corrupt", "sources/0/7")
    assert "line 2" in finding.message
    assert _logs(checkpoint)[0][2] == 7, "the last good figures are kept"

    log_file.write_bytes(good)
    checkpoint.refresh_from_db()
    sync_checkpoint(
        checkpoint.pk, now=checkpoint.last_inspected_at + timedelta(seconds=settings.FULL_WALK_INTERVAL_SECONDS)
    )

    assert not Finding.objects.open().filter(checkpoint=checkpoint).exists()


def test_state_partitions_are_stored_with_rows_at_the_restart_version(copy_checkpoint):
    from dashboards.models import StatePartition

    base = copy_checkpoint(OUR_FIXTURES / "killed_mid_batch")
    checkpoint = make_checkpoint(url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)

    rows = list(StatePartition.objects.filter(checkpoint=checkpoint).for_panel())
    assert [(r.operator, r.partition, r.store, r.provider) for r in rows] == [
        (0, 0, "default", "hdfs"),
        (0, 1, "default", "hdfs"),
    ]
    report = json.loads((base / "spark-report.json").read_text())
    batch_5 = next(p for p in report["progress"] if p["batchId"] == 5)
    assert sum(r.rows for r in rows) == batch_5["stateOperators"][0]["numRowsTotal"]
    # Batch 6 wrote version 7 and has no commit: every figure is of version 6, 7 is named apart.
    assert {(r.latest_version, r.rows_version, tuple(r.uncommitted_versions)) for r in rows} == {(6, 6, (7,))}


def test_rocksdb_format_2_state_uses_the_unique_ids_of_the_synced_commits(copy_checkpoint):
    from dashboards.models import StatePartition

    base = copy_checkpoint(OUR_FIXTURES / "rocksdb_checkpoint_v2_dedup")
    checkpoint = make_checkpoint(url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)

    rows = list(StatePartition.objects.filter(checkpoint=checkpoint).for_panel())
    assert {r.provider for r in rows} == {"rocksdb"} and len(rows) == 2
    assert all(r.load_files and r.load_bytes for r in rows)
    assert not Finding.objects.open().filter(checkpoint=checkpoint, severity=Finding.Severity.ERROR).exists()


def test_the_configured_compact_interval_applies_until_the_sink_log_compacts(copy_checkpoint, checkpoint_roots):
    from fixture_paths import SPARK_TEST_RESOURCES

    checkpoint_dir = copy_checkpoint(SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent")
    log = checkpoint_roots / "sink" / "_spark_metadata"
    write_sink_log(log, range(3))
    checkpoint = make_checkpoint(url=str(checkpoint_dir), sink_log_url=str(log.parent), file_log_compact_interval=5)

    sync_checkpoint(checkpoint.pk)

    sink = MetadataLog.objects.get(checkpoint=checkpoint)
    assert (sink.compact_interval, sink.next_compaction_batch_id) == (5, 4)


WINDOWED = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"


@pytest.fixture
def batch_11_running(copy_checkpoint, tmp_path):
    """The windowed aggregation as it stood while batch 11 ran: its commit put aside, and when Spark planned it."""
    root = copy_checkpoint(WINDOWED, "running")
    aside = tmp_path / "commit-11"
    aside.mkdir()
    for name in ("11", ".11.crc"):
        (root / "commits" / name).rename(aside / name)
    return root, aside, planned_at(root, 11)


def _open_findings(checkpoint: Checkpoint) -> list[tuple[str, str]]:
    return list(checkpoint.findings.open().values_list("code", "path"))


def test_a_full_pass_while_the_newest_batch_runs_reports_it_only_once_it_is_overdue(batch_11_running, settings):
    root, _, planned = batch_11_running
    settings.HEALTH_STALLED_AFTER_SECONDS = 120
    checkpoint = make_checkpoint(url=str(root))

    sync_checkpoint(checkpoint.pk, now=planned + timedelta(seconds=5))
    running = _open_findings(checkpoint)
    sync_checkpoint(checkpoint.pk, now=planned + timedelta(seconds=5 + settings.FULL_WALK_INTERVAL_SECONDS))
    overdue = _open_findings(checkpoint)

    assert running == []
    assert overdue == [("batch-uncommitted", "offsets/11")]


def test_a_finding_about_a_batch_is_checked_again_by_the_sync_that_reads_its_commit(batch_11_running):
    root, aside, planned = batch_11_running
    checkpoint = make_checkpoint(url=str(root))
    first = sync_checkpoint(checkpoint.pk, now=planned + timedelta(hours=1))  # long overdue: reported
    assert _open_findings(checkpoint) == [("batch-uncommitted", "offsets/11")]
    for name in (".11.crc", "11"):  # the batch ends after all
        (aside / name).rename(root / "commits" / name)

    run = sync_checkpoint(checkpoint.pk, now=first.started_at + timedelta(seconds=30))  # no full pass due

    assert (run.kind, run.new_commits) == (SyncRun.Kind.PROBE, 1)
    assert _open_findings(checkpoint) == []
    assert Finding.objects.get(checkpoint=checkpoint, code="batch-uncommitted").resolved_at == run.started_at


def _probe_after_the_interval(checkpoint: Checkpoint, settings) -> SyncRun:
    checkpoint.refresh_from_db()
    later = checkpoint.last_probed_at + timedelta(seconds=settings.INSPECT_INTERVAL_SECONDS)
    return sync_checkpoint(checkpoint.pk, now=later)


def test_between_walks_the_probe_follows_the_source_logs_next_files_without_a_walk(dedup, settings):
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    walked_at = Checkpoint.objects.get(pk=checkpoint.pk).last_inspected_at
    log = dedup / "checkpoint" / "sources" / "0"
    # Batch 8 of the log is a compaction (interval 3): every entry of 7 plus one new file.
    entries = (log / "5.compact").read_bytes().splitlines()[1:] + (log / "6").read_bytes().splitlines()[1:]
    entries += (log / "7").read_bytes().splitlines()[1:]
    new_entry = json.dumps({"path": "file:///in/f008.json", "timestamp": 1, "batchId": 8}).encode()
    (log / "8.compact").write_bytes(b"\n".join([b"v1", *entries, new_entry]))

    run = _probe_after_the_interval(checkpoint, settings)

    checkpoint.refresh_from_db()
    assert (run.message, checkpoint.last_inspected_at) == ("", walked_at)
    assert _logs(checkpoint) == [("source", 3, 8, 9, (log / "8.compact").stat().st_size, [2, 5, 8])]


def test_a_log_file_the_probe_cannot_read_makes_that_sync_walk_in_full(dedup, settings):
    checkpoint = make_checkpoint(url=str(dedup / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    walked_at = Checkpoint.objects.get(pk=checkpoint.pk).last_inspected_at
    (dedup / "checkpoint" / "sources" / "0" / "8.compact").write_bytes(b"v1\n{not json")

    run = _probe_after_the_interval(checkpoint, settings)

    checkpoint.refresh_from_db()
    assert run.message.startswith("full walk: the probe between walks could not explain "), run.message
    assert checkpoint.last_inspected_at > walked_at
    finding = Finding.objects.open().get(checkpoint=checkpoint)
    assert (finding.code, finding.path) == ("file-corrupt", "sources/0/8.compact")
