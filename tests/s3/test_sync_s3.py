"""A sync of a checkpoint on S3 (moto's server mode) gives the rows and call counts of a local one."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.checkpoint_history import read_template, write_batches
from dashboards.models import Checkpoint, SyncRun
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers.sync import sync_checkpoint

from .conftest import BUCKET

pytestmark = pytest.mark.django_db

FIXTURE = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"
ROW_FIELDS = ("batch_id", "timestamp_ms", "watermark_ms", "conf", "sources", "is_committed", "next_batch_watermark_ms")


def _upload(client, directory: Path, prefix: str) -> None:
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            client.put_object(
                Bucket=BUCKET, Key=f"{prefix}/{path.relative_to(directory).as_posix()}", Body=path.read_bytes()
            )


def _rows(checkpoint: Checkpoint) -> list[tuple]:
    return list(checkpoint.batches.order_by("batch_id").values_list(*ROW_FIELDS))


def _calls(run: SyncRun) -> tuple:
    return (run.status, run.kind, run.list_calls, run.info_calls, run.read_calls, run.bytes_read)


def test_a_checkpoint_on_s3_syncs_to_the_rows_and_calls_of_the_same_checkpoint_on_disk(s3_bucket, copy_checkpoint):
    _upload(s3_bucket, FIXTURE, "query1")
    remote = make_checkpoint(name="remote", url=f"s3://{BUCKET}/query1")
    local = make_checkpoint(name="local", url=str(copy_checkpoint(FIXTURE, "query1")))

    remote_run, local_run = sync_checkpoint(remote.pk), sync_checkpoint(local.pk)

    assert remote_run.message == ""
    assert _rows(remote) == _rows(local) != []
    assert _calls(remote_run) == _calls(local_run)
    assert remote_run.status == SyncRun.Status.OK


def test_a_probe_on_s3_reads_only_the_new_names_and_lists_nothing(s3_bucket, tmp_path):
    history = tmp_path / "history"
    write_batches(history, range(30), read_template())
    _upload(s3_bucket, history, "long")
    checkpoint = make_checkpoint(name="long", url=f"s3://{BUCKET}/long")
    sync_checkpoint(checkpoint.pk)
    template = read_template()
    for batch_id in (30, 31):
        s3_bucket.put_object(Bucket=BUCKET, Key=f"long/offsets/{batch_id}", Body=template.offsets)
        s3_bucket.put_object(Bucket=BUCKET, Key=f"long/commits/{batch_id}", Body=template.commits)

    run = sync_checkpoint(checkpoint.pk)

    # offsets/30, offsets/31, offsets/32 (missing), commits/30, commits/31.
    assert (run.kind, run.list_calls, run.read_calls) == (SyncRun.Kind.PROBE, 0, 5)
    assert run.bytes_read == 2 * (len(template.offsets) + len(template.commits))
    assert checkpoint.batches.filter(is_committed=True).count() == 32


def test_a_first_sync_on_s3_with_unreadable_files_reports_them_as_on_disk(
    s3_bucket, tmp_path, copy_checkpoint, monkeypatch
):
    # The reconcile reads its files ahead, several at a time: an error must still name its file.
    monkeypatch.setattr("workers.sync.READ_AHEAD_BATCHES", 5)  # windows of 5 batches: 0-4, 5-9, 10-11
    history = tmp_path / "history"
    write_batches(history, range(12), read_template())
    (history / "offsets" / "4").write_bytes(b"v1\n{not json\n")
    (history / "commits" / "7").write_bytes(b"v99\n{}\n")
    (history / "offsets" / "9").write_bytes(b"v1\n" + b"x" * 200)
    _upload(s3_bucket, history, "broken")
    remote = make_checkpoint(name="remote", url=f"s3://{BUCKET}/broken")
    local = make_checkpoint(name="local", url=str(copy_checkpoint(history, "broken")))

    remote_run, local_run = sync_checkpoint(remote.pk), sync_checkpoint(local.pk)

    def issues(checkpoint: Checkpoint) -> list[tuple[str, str, str]]:
        return list(checkpoint.issues.order_by("path").values_list("path", "error_type", "reason"))

    assert [issue[0] for issue in issues(local)] == ["commits/7", "offsets/4", "offsets/9"]
    assert issues(remote) == issues(local)
    assert _rows(remote) == _rows(local)
    assert _calls(remote_run) == _calls(local_run)


def _synced_twins(
    s3_bucket, tmp_path: Path, copy_checkpoint, name: str, batches: int
) -> tuple[Checkpoint, Checkpoint, Path]:
    """The same history of ``batches`` on S3 (under ``name``) and on disk, each synced once."""
    history = tmp_path / "history"
    write_batches(history, range(batches), read_template())
    _upload(s3_bucket, history, name)
    remote = make_checkpoint(name="remote", url=f"s3://{BUCKET}/{name}")
    local_dir = copy_checkpoint(history, name)
    local = make_checkpoint(name="local", url=str(local_dir))
    sync_checkpoint(remote.pk), sync_checkpoint(local.pk)
    return remote, local, local_dir


def test_a_probe_on_s3_goes_past_an_empty_offsets_file_as_on_disk(s3_bucket, tmp_path, copy_checkpoint):
    # A crash can leave an empty log file on a store without atomic renames ("incomplete log
    # file"); S3 refuses a range read of it (416), which must not read as a storage failure that
    # stops the probe.
    remote, local, local_dir = _synced_twins(s3_bucket, tmp_path, copy_checkpoint, "gap", 3)
    template = read_template()
    for name, body in (("offsets/3", b""), ("offsets/4", template.offsets), ("commits/4", template.commits)):
        s3_bucket.put_object(Bucket=BUCKET, Key=f"gap/{name}", Body=body)
        (local_dir / name).write_bytes(body)

    remote_run, local_run = sync_checkpoint(remote.pk), sync_checkpoint(local.pk)

    def issues(checkpoint: Checkpoint) -> list[tuple[str, str]]:
        return list(checkpoint.issues.open().values_list("path", "error_type"))

    assert issues(local) == [("offsets/3", "IncompleteLogFileError")]
    assert issues(remote) == issues(local)
    assert remote_run.kind == local_run.kind == SyncRun.Kind.PROBE
    assert list(remote.batches.values_list("batch_id", flat=True).order_by("batch_id")) == [0, 1, 2, 4]
    assert _rows(remote) == _rows(local)


def test_a_probe_catching_up_on_s3_reads_the_commits_ahead_with_the_calls_of_a_disk(
    s3_bucket, moto_server, tmp_path, copy_checkpoint
):
    # After downtime a probe finds many new batches; their commits' names are then known.
    remote, local, local_dir = _synced_twins(s3_bucket, tmp_path, copy_checkpoint, "behind", 2)
    write_batches(local_dir, range(2, 42), read_template())
    _upload(s3_bucket, local_dir, "behind")

    moto_server.reset_counts()
    moto_server.delay_seconds = 0.01
    try:
        remote_run = sync_checkpoint(remote.pk)
    finally:
        moto_server.delay_seconds = 0.0
    local_run = sync_checkpoint(local.pk)

    assert remote_run.kind == local_run.kind == SyncRun.Kind.PROBE
    assert _calls(remote_run) == _calls(local_run)
    assert remote_run.read_calls == 41 + 40  # offsets/2..42 (42 missing), commits/2..41
    assert _rows(remote) == _rows(local)
    assert remote.batches.filter(is_committed=True).count() == 42
    assert moto_server.max_in_flight >= 2
