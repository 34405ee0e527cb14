"""workers.sync on the real database and real checkpoint files (copies of Spark-written ones)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from dashboards.models import Batch, Checkpoint, SyncIssue, SyncRun
from factories import make_checkpoint, planned_at
from fixture_paths import SPARK_TEST_RESOURCES, our_fixture_checkpoints
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

INCONSISTENT = SPARK_TEST_RESOURCES / "checkpoint-test-offsetId-commitId-inconsistent"
AGGREGATE_231 = SPARK_TEST_RESOURCES / "checkpoint-version-2.3.1-streaming-aggregate-state-format-1"


def _batch_ids(checkpoint: Checkpoint) -> list[int]:
    return list(checkpoint.batches.order_by("batch_id").values_list("batch_id", flat=True))


def _append_batch(checkpoint_dir: Path, batch_id: int, *, committed: bool) -> None:
    """Write the next batch the way Spark would: a copy of the previous entry under the new id."""
    previous = max(int(p.name) for p in (checkpoint_dir / "offsets").iterdir() if p.name.isdigit())
    (checkpoint_dir / "offsets" / str(batch_id)).write_bytes((checkpoint_dir / "offsets" / str(previous)).read_bytes())
    if committed:
        (checkpoint_dir / "commits" / str(batch_id)).write_bytes(b'v1\n{"nextBatchWatermarkMs":0}')


def test_first_sync_stores_every_batch_and_marks_the_one_without_commit(copy_checkpoint):
    checkpoint = make_checkpoint(url=str(copy_checkpoint(INCONSISTENT)))

    run = sync_checkpoint(checkpoint.pk)

    checkpoint.refresh_from_db()
    assert _batch_ids(checkpoint) == [0, 1, 2, 4]
    assert list(checkpoint.batches.uncommitted().values_list("batch_id", flat=True)) == [4]
    assert (checkpoint.latest_batch_id, checkpoint.latest_committed_batch_id, checkpoint.uncommitted_batch_count) == (
        4,
        2,
        1,
    )
    assert str(checkpoint.query.query_id) == "d4358946-170c-49a7-823b-d8e4e9126616"
    assert run.status == SyncRun.Status.OK
    assert (run.new_batches, run.new_commits) == (4, 3)


def test_batch_row_holds_the_offsets_metadata_and_sources_as_written(copy_checkpoint):
    checkpoint = make_checkpoint(url=str(copy_checkpoint(INCONSISTENT)))

    sync_checkpoint(checkpoint.pk)

    batch = checkpoint.batches.get(batch_id=1)
    assert batch.timestamp_ms == 1531292030005
    assert batch.watermark_ms == 5000
    assert batch.conf["spark.sql.shuffle.partitions"] == "5"
    assert batch.sources == ["1"]
    assert batch.is_committed


def test_second_sync_reads_only_the_new_files(copy_checkpoint):
    directory = copy_checkpoint(INCONSISTENT)
    checkpoint = make_checkpoint(url=str(directory))
    # While batch 4 runs, as for a live query: no finding about it waits for the next commit.
    first = sync_checkpoint(checkpoint.pk, now=planned_at(directory, 4) + timedelta(seconds=1))
    _append_batch(directory, 5, committed=True)

    run = sync_checkpoint(checkpoint.pk, now=first.started_at + timedelta(seconds=1))

    assert _batch_ids(checkpoint) == [0, 1, 2, 4, 5]
    # A probe, no listing: offsets/5 (found), offsets/6 (missing: the end), commits/4 (missing:
    # batch 4 is still uncommitted) and commits/5 (found).
    assert (run.kind, run.read_calls, run.list_calls) == (SyncRun.Kind.PROBE, 4, 0)
    assert (run.new_batches, run.new_commits) == (1, 1)


def test_a_commit_written_after_the_first_sync_commits_the_known_batch(copy_checkpoint):
    directory = copy_checkpoint(INCONSISTENT)
    checkpoint = make_checkpoint(url=str(directory))
    # While batch 4 runs, as for a live query: no finding about it waits for the next commit.
    first = sync_checkpoint(checkpoint.pk, now=planned_at(directory, 4) + timedelta(seconds=1))
    (directory / "commits" / "4").write_bytes(b'v1\n{"nextBatchWatermarkMs":7}')

    run = sync_checkpoint(checkpoint.pk, now=first.started_at + timedelta(seconds=1))

    batch = checkpoint.batches.get(batch_id=4)
    assert (batch.is_committed, batch.next_batch_watermark_ms) == (True, 7)
    # offsets/5 (missing: nothing new) and commits/4.
    assert (run.new_batches, run.new_commits, run.read_calls) == (0, 1, 2)
    checkpoint.refresh_from_db()
    assert checkpoint.uncommitted_batch_count == 0


def test_a_corrupt_file_becomes_an_issue_and_the_other_batches_are_still_read(copy_checkpoint):
    directory = copy_checkpoint(INCONSISTENT)
    (directory / "offsets" / "1").write_bytes(b"v1\n{not json")
    checkpoint = make_checkpoint(url=str(directory))

    run = sync_checkpoint(checkpoint.pk)

    assert _batch_ids(checkpoint) == [0, 2, 4]
    issue = SyncIssue.objects.get(checkpoint=checkpoint)
    assert issue.path == "offsets/1"
    assert "offsets/1" in issue.reason
    assert run.status == SyncRun.Status.PARTIAL


def test_an_issue_is_resolved_once_the_file_reads_fine(copy_checkpoint):
    directory = copy_checkpoint(INCONSISTENT)
    good = (directory / "offsets" / "1").read_bytes()
    (directory / "offsets" / "1").write_bytes(b"")
    checkpoint = make_checkpoint(url=str(directory))
    sync_checkpoint(checkpoint.pk)
    assert "Incomplete log file" in checkpoint.issues.open().get().reason
    (directory / "offsets" / "1").write_bytes(good)

    sync_checkpoint(checkpoint.pk)

    assert not checkpoint.issues.open().exists()
    assert _batch_ids(checkpoint) == [0, 1, 2, 4]


def test_an_unsupported_log_version_names_the_file(copy_checkpoint):
    directory = copy_checkpoint(INCONSISTENT)
    (directory / "commits" / "2").write_bytes(b'v9\n{"nextBatchWatermarkMs":0}')
    checkpoint = make_checkpoint(url=str(directory))

    sync_checkpoint(checkpoint.pk)

    issue = checkpoint.issues.open().get()
    assert (issue.path, issue.error_type) == ("commits/2", "UnsupportedVersionError")
    assert "v9" in issue.reason
    assert not checkpoint.batches.get(batch_id=2).is_committed


def test_a_checkpoint_outside_the_allowed_roots_is_not_read(copy_checkpoint, settings, tmp_path):
    checkpoint = make_checkpoint(url=str(copy_checkpoint(INCONSISTENT)))
    settings.CHECKPOINT_ROOTS = [str(tmp_path / "elsewhere")]

    run = sync_checkpoint(checkpoint.pk)

    assert run.status == SyncRun.Status.FAILED
    assert checkpoint.batches.count() == 0
    assert checkpoint.issues.open().get().error_type == "PathNotAllowedError"


def test_a_sync_is_skipped_while_another_worker_holds_the_checkpoint(copy_checkpoint):
    checkpoint = make_checkpoint(url=str(copy_checkpoint(INCONSISTENT)))
    now = timezone.now()
    assert Checkpoint.objects.take_sync_lease(checkpoint.pk, owner="other", now=now, seconds=300)

    assert sync_checkpoint(checkpoint.pk, now=now + timedelta(seconds=10)) is None
    assert checkpoint.batches.count() == 0


def test_a_dead_workers_lease_expires(copy_checkpoint):
    checkpoint = make_checkpoint(url=str(copy_checkpoint(INCONSISTENT)))
    now = timezone.now()
    Checkpoint.objects.take_sync_lease(checkpoint.pk, owner="crashed", now=now - timedelta(seconds=600), seconds=300)

    assert sync_checkpoint(checkpoint.pk, now=now) is not None
    assert checkpoint.batches.count() == 4


def test_sync_twice_changes_nothing(copy_checkpoint):
    checkpoint = make_checkpoint(url=str(copy_checkpoint(AGGREGATE_231)))
    sync_checkpoint(checkpoint.pk)
    before = list(Batch.objects.values_list("batch_id", "timestamp_ms", "is_committed", "sources"))

    run = sync_checkpoint(checkpoint.pk)

    assert list(Batch.objects.values_list("batch_id", "timestamp_ms", "is_committed", "sources")) == before
    # One probe of the next offsets file, which is missing; no listing.
    assert (run.new_batches, run.new_commits, run.read_calls, run.list_calls) == (0, 0, 1, 0)


def test_a_missing_checkpoint_directory_syncs_to_nothing_and_says_what_the_path_holds(checkpoint_roots):
    checkpoint = make_checkpoint(url=str(checkpoint_roots / "not-started-yet"))

    run = sync_checkpoint(checkpoint.pk)

    assert run.status == SyncRun.Status.OK
    assert checkpoint.batches.count() == 0
    checkpoint.refresh_from_db()
    assert checkpoint.root_problem.endswith("/not-started-yet: no such file or folder")


def test_a_folder_that_becomes_a_checkpoint_is_no_longer_reported_as_none(checkpoint_roots, copy_checkpoint, settings):
    settings.RECONCILE_INTERVAL_SECONDS = 0  # the fixture's offsets may start past 0 (Spark purged them)
    folder = checkpoint_roots / "later"
    folder.mkdir()
    (folder / "notes.txt").write_text("a folder that is no checkpoint\n")
    checkpoint = make_checkpoint(url=str(folder))
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    assert "not a Spark checkpoint" in checkpoint.root_problem

    (folder / "notes.txt").unlink()
    folder.rmdir()
    copy_checkpoint(_our_first_fixture(), "later")
    sync_checkpoint(checkpoint.pk)

    checkpoint.refresh_from_db()
    assert (checkpoint.root_problem, checkpoint.batches.exists()) == ("", True)


def _our_first_fixture() -> Path:
    return our_fixture_checkpoints()[0]


def test_sync_of_a_deleted_checkpoint_does_nothing():
    assert sync_checkpoint(424242) is None


@pytest.mark.parametrize("fixture_checkpoint", our_fixture_checkpoints(), ids=lambda p: p.parent.name)
def test_synced_rows_equal_what_spark_read_from_each_pyspark_fixture(copy_checkpoint, fixture_checkpoint):
    report = json.loads((fixture_checkpoint.parent / "spark-report.json").read_text())
    checkpoint = make_checkpoint(url=str(copy_checkpoint(fixture_checkpoint, fixture_checkpoint.parent.name)))

    sync_checkpoint(checkpoint.pk)

    committed = {entry["batch_id"]: entry["next_batch_watermark_ms"] for entry in report["commit_log"]}
    expected = [
        (
            e["batch_id"],
            e["batch_timestamp_ms"],
            e["batch_watermark_ms"],
            e["conf"],
            e["offsets"],
            e["batch_id"] in committed,
            committed.get(e["batch_id"]),
        )
        for e in report["offset_log"]
    ]
    rows = checkpoint.batches.order_by("batch_id").values_list(
        "batch_id", "timestamp_ms", "watermark_ms", "conf", "sources", "is_committed", "next_batch_watermark_ms"
    )
    assert list(rows) == expected
    assert str(Checkpoint.objects.get(pk=checkpoint.pk).query.query_id) == report["query_id"]


def test_a_sync_keeps_the_lag_of_the_newest_and_oldest_recent_batches_that_report_it(copy_checkpoint):
    from dashboards.models import BatchProgress
    from fixture_paths import OUR_FIXTURES
    from kafka_progress import BEHIND_PER_BATCH, with_kafka_source
    from workers.checkpoint.progress import progress_from_dict
    from workers.status_figures import RECENT_BATCHES

    base = copy_checkpoint(OUR_FIXTURES / "file_source_dedup")
    checkpoint = make_checkpoint(url=str(base / "checkpoint"))
    report = json.loads((base / "spark-report.json").read_text())["progress"]  # batches 0-15
    # The file source as Spark reported it up to batch 11 (no latestOffset), Kafka from batch 12.
    for fields in report[:12] + with_kafka_source(report[12:]):
        BatchProgress.objects.store(progress_from_dict(fields, source="spark-report.json"), origin="listener")

    sync_checkpoint(checkpoint.pk)

    checkpoint.refresh_from_db()
    assert RECENT_BATCHES == 10  # batches 6-15: the oldest reporting a lag is 12
    assert (checkpoint.recent_offsets_behind, checkpoint.earlier_offsets_behind) == (
        BEHIND_PER_BATCH * 15,
        BEHIND_PER_BATCH * 12,
    )
