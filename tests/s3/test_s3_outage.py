"""S3 going away and coming back (moto's server stopped and started on the same port).

A sync during the outage fails with the storage error named, quickly and without touching the
rows; a local checkpoint syncs on meanwhile; once S3 answers again the next sync catches up.
"""

from __future__ import annotations

import time

import boto3
import pytest
from moto.server import ThreadedMotoServer

from bench.checkpoint_history import read_template, write_batches
from dashboards.models import SyncRun
from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from worker_process import free_port
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

BUCKET = "outage"


@pytest.fixture
def restartable_s3(checkpoint_roots, monkeypatch, settings):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    settings.S3_ENDPOINT_URL = endpoint
    settings.CHECKPOINT_ROOTS = [*settings.CHECKPOINT_ROOTS, f"s3://{BUCKET}"]
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    state = {"server": server}

    def stop():
        state["server"].stop()

    def start():
        state["server"] = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        state["server"].start()

    yield client, stop, start
    state["server"].stop()


def test_a_sync_during_an_s3_outage_fails_clearly_and_the_next_one_catches_up(
    restartable_s3, copy_checkpoint, tmp_path
):
    client, stop, start = restartable_s3
    history = tmp_path / "history"
    write_batches(history, range(5), read_template())
    for path in sorted(history.rglob("*")):
        if path.is_file():
            client.put_object(Bucket=BUCKET, Key=f"q/{path.relative_to(history).as_posix()}", Body=path.read_bytes())
    remote = make_checkpoint(name="remote", url=f"s3://{BUCKET}/q")
    local = make_checkpoint(
        name="local", url=str(copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "local"))
    )
    assert sync_checkpoint(remote.pk).status == SyncRun.Status.OK

    stop()
    started = time.monotonic()
    during = sync_checkpoint(remote.pk)
    outage_seconds = time.monotonic() - started
    print(f"a sync against a stopped S3 endpoint ended after {outage_seconds:.1f} s")

    remote.refresh_from_db()
    assert during.status in (SyncRun.Status.FAILED, SyncRun.Status.PARTIAL)
    reasons = during.message + " ".join(remote.issues.open().values_list("reason", flat=True))
    assert "127.0.0.1" in reasons or "connect" in reasons.lower(), reasons
    assert remote.batches.count() == 5 and remote.latest_batch_id == 4
    assert sync_checkpoint(local.pk).status == SyncRun.Status.OK

    start()
    template = read_template()
    for batch_id in (5, 6):
        client.put_object(Bucket=BUCKET, Key=f"q/offsets/{batch_id}", Body=template.offsets)
        client.put_object(Bucket=BUCKET, Key=f"q/commits/{batch_id}", Body=template.commits)
    after = sync_checkpoint(remote.pk)

    remote.refresh_from_db()
    assert after.status == SyncRun.Status.OK, after.message
    assert list(remote.batches.order_by("batch_id").values_list("batch_id", flat=True)) == list(range(7))
    assert remote.issues.open().count() == 0
