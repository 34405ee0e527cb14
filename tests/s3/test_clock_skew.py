"""Maintenance on a storage whose clock is an hour off: file ages are measured on the storage's clock.

The storage is moto's server mode run under Debian's libfaketime: a real S3 endpoint that dates
every object by its own clock, an hour behind or ahead of ours, as a store with a drifting clock
would. Each test first shows what judging the same files on our clock would decide, so it fails
if the trap it guards against is not there.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
import uuid

import boto3
import pytest

from fixture_paths import OUR_FIXTURES
from worker_process import free_port, wait_for
from workers.checkpoint.maintenance.actions import plan_action
from workers.checkpoint.maintenance.cleanup import plan_cleanup
from workers.checkpoint.maintenance.clock import PROBE_NAME, WHOLE_SECOND_RESOLUTION, read_storage_clock
from workers.checkpoint.maintenance.preconditions import query_stopped
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

BUCKET = "skewed"
HOUR = 3600
FIXTURE = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"
IN_FLIGHT = f"state/0/0/.13.delta.{uuid.uuid4()}.tmp"


def _faketime_library() -> str:
    found = glob.glob("/usr/lib/*/faketime/libfaketime.so.1")
    if not found:
        pytest.fail("libfaketime is not installed (Debian package libfaketime; .ci/system-packages installs it)")
    return found[0]


@pytest.fixture
def s3_with_clock(monkeypatch):
    """Start an S3 endpoint whose clock is ``offset`` seconds off ours; give a storage on a fresh checkpoint in it."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    servers = []

    def start(offset: int) -> tuple[CheckpointStorage, object]:
        port = free_port()
        environment = {**os.environ, "LD_PRELOAD": _faketime_library(), "FAKETIME": f"{offset:+d}"}
        command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
        servers.append(subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        endpoint = f"http://127.0.0.1:{port}"
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        wait_for(lambda: _answers(client), "moto's server to answer", timeout=30)
        client.create_bucket(Bucket=BUCKET)
        for path in sorted(FIXTURE.rglob("*")):
            if path.is_file():
                client.put_object(
                    Bucket=BUCKET, Key=f"q/{path.relative_to(FIXTURE).as_posix()}", Body=path.read_bytes()
                )
        return CheckpointStorage(f"s3://{BUCKET}/q", storage_options={"endpoint_url": endpoint}), client

    yield start
    for server in servers:
        server.terminate()
        server.wait(timeout=20)


def _answers(client) -> bool:
    try:
        client.list_buckets()
        return True
    except Exception:  # the server is still starting
        return False


def _judged_on_our_clock(storage: CheckpointStorage, quiet_seconds: float):
    return query_stopped(
        storage.list_dir("offsets"), storage.list_dir("commits"), now=time.time(), quiet_seconds=quiet_seconds
    )


def _query_stopped(storage: CheckpointStorage, quiet_seconds: float):
    plan = plan_action("purge", storage, {"keep_batches": 1}, now=time.time(), quiet_seconds=quiet_seconds)
    return next(p for p in plan.preconditions if p.name == "query-stopped"), plan


def test_the_clock_of_a_store_an_hour_behind_is_read_by_stamping_a_file_that_does_not_stay(s3_with_clock):
    storage, _ = s3_with_clock(-HOUR)

    reading = read_storage_clock(storage)

    assert abs(reading.offset + HOUR) <= reading.uncertainty + 1, reading
    assert not [info.name for info in storage.list_dir() if info.name.startswith(PROBE_NAME)]


def test_on_a_store_an_hour_behind_a_batch_written_a_moment_ago_is_recent(s3_with_clock):
    storage, _ = s3_with_clock(-HOUR)
    assert _judged_on_our_clock(storage, 300).ok  # on our clock the files look an hour old

    stopped, plan = _query_stopped(storage, 300)

    assert not stopped.ok and "a batch was written" in stopped.detail
    assert any(p.name == "storage-clock" and "behind this worker's" in p.detail for p in plan.preconditions), (
        plan.preconditions
    )


def test_on_a_store_an_hour_ahead_a_stopped_query_is_idle_after_the_quiet_period_not_after_an_hour(s3_with_clock):
    storage, _ = s3_with_clock(+HOUR)
    assert not _judged_on_our_clock(storage, 2).ok  # on our clock the files are dated in the future

    assert not _query_stopped(storage, 2)[0].ok
    # S3 dates to the whole second, so the storage's "now" is taken up to about 2 s early (the
    # probe's stamp and the files' stamps each floor to the second): wait the quiet period and that.
    time.sleep(2 + 2 * WHOLE_SECOND_RESOLUTION + 1)
    stopped, plan = _query_stopped(storage, 2)

    assert stopped.ok, stopped.detail
    assert any(p.name == "storage-clock" and "ahead of this worker's" in p.detail for p in plan.preconditions), (
        plan.preconditions
    )


def test_on_a_store_an_hour_behind_a_temporary_file_being_written_is_not_cleaned_up(s3_with_clock):
    storage, client = s3_with_clock(-HOUR)
    client.put_object(Bucket=BUCKET, Key=f"q/{IN_FLIGHT}", Body=b"a state file being written")
    on_our_clock = plan_cleanup(storage, now=time.time(), quiet_seconds=300)
    assert IN_FLIGHT in [d.path for d in on_our_clock.deletes]  # an hour old on our clock: garbage

    plan = plan_action("cleanup", storage, {}, now=time.time(), quiet_seconds=300)

    assert IN_FLIGHT not in [d.path for d in plan.deletes]
