"""On S3 (moto's server mode) the state figures follow the batches at most once per
CKPTWEB_STATE_FOLLOW_MIN_SECONDS per checkpoint, and then equal those of the same files on disk."""

from __future__ import annotations

from datetime import timedelta

import pytest

from factories import make_checkpoint, planned_at
from fixture_paths import OUR_FIXTURES
from workers.checkpoint.statefollow import StateFile, follow_store, read_state_keys
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statesummary import StateConf
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.sync import sync_checkpoint

from .conftest import BUCKET
from .test_sync_s3 import _upload

pytestmark = pytest.mark.django_db

FIXTURE = OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint"
HELD_BACK = (10, 11)
FIGURES = ("partition", "latest_version", "snapshot_version", "delta_chain", "rows", "rows_version", "note")


def _figures(checkpoint) -> list[tuple]:
    return list(checkpoint.state_partitions.order_by("partition").values_list(*FIGURES))


def test_on_s3_the_state_follows_at_most_once_per_interval(s3_bucket, copy_checkpoint, settings, tmp_path):
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    settings.STATE_FOLLOW_MIN_SECONDS = 60
    _upload(s3_bucket, FIXTURE, "agg")
    held = {
        batch_id: s3_bucket.get_object(Bucket=BUCKET, Key=f"agg/commits/{batch_id}")["Body"].read()
        for batch_id in HELD_BACK
    }
    for batch_id in HELD_BACK:
        s3_bucket.delete_object(Bucket=BUCKET, Key=f"agg/commits/{batch_id}")
    checkpoint = make_checkpoint(name="remote", url=f"s3://{BUCKET}/agg")
    # A full pass (rows at version 10) while batch 11 runs, as for a live query: no finding about
    # the uncommitted batches waits for the commits given back.
    first = sync_checkpoint(checkpoint.pk, now=planned_at(FIXTURE, 11) + timedelta(seconds=1))

    s3_bucket.put_object(Bucket=BUCKET, Key="agg/commits/10", Body=held[10])
    too_soon = sync_checkpoint(checkpoint.pk, now=first.started_at + timedelta(seconds=59))
    assert {row[5] for row in _figures(checkpoint)} == {10}
    # offsets/12 (missing), commits/10 and commits/11 (missing): nothing of the state.
    assert (too_soon.new_commits, too_soon.list_calls, too_soon.info_calls, too_soon.read_calls) == (1, 0, 0, 3)

    s3_bucket.put_object(Bucket=BUCKET, Key="agg/commits/11", Body=held[11])
    sync_checkpoint(checkpoint.pk, now=first.started_at + timedelta(seconds=60))

    local = make_checkpoint(name="local", url=str(copy_checkpoint(FIXTURE, "agg")))
    sync_checkpoint(local.pk)  # a full pass of every file, on disk
    assert _figures(checkpoint) == _figures(local)
    assert {row[5] for row in _figures(checkpoint)} == {12}


def test_following_a_store_on_s3_looks_a_snapshot_up_in_one_request_and_lists_nothing(moto_server, s3_bucket):
    """s3fs's info of a missing key is a HEAD and then a LIST (to tell a folder): for the snapshot
    looked up at each version of each partition, a LIST per partition per sync."""
    _upload(s3_bucket, FIXTURE, "agg")
    on_disk = CheckpointStorage(str(FIXTURE))
    store = next(store for store in list_state_store_dirs(on_disk) if store.partition == 0)
    conf = StateConf("lz4", row_checksum=False)  # Spark's defaults, as the fixture ran with
    keys = read_state_keys(on_disk, store, 10, conf=conf)
    remote = CheckpointStorage(
        f"s3://{BUCKET}/agg", storage_options={"endpoint_url": moto_server.endpoint, "skip_instance_cache": True}
    )
    moto_server.reset_counts()

    followed = follow_store(remote, store.path, "hdfs", keys, 12, conf=conf, unique_ids={})

    # Version 11: its delta, and a GET of one byte that finds no 11.snapshot. Version 12: its
    # delta, a GET that finds 12.snapshot, and a HEAD for its size.
    assert {kind: moto_server.requests_by_kind[kind] for kind in ("LIST", "GET", "HEAD")} == {
        "LIST": 0,
        "GET": 4,
        "HEAD": 1,
    }
    snapshot_size = (FIXTURE / store.path / "12.snapshot").stat().st_size
    assert [(files.version, files.snapshot) for files in followed.versions] == [
        (11, None),
        (12, StateFile("12.snapshot", snapshot_size)),
    ]
    assert followed.rows == read_state_keys(on_disk, store, 12, conf=conf).rows
