"""The one "as of" rule of every panel read by a pass: which batch, how far behind, when next."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from dashboards.models import Checkpoint
from dashboards.query_page.as_of import Read, as_of, full_pass_as_of, state_read, sync_as_of

NOW = datetime(2026, 11, 27, 12, 13, 1, tzinfo=UTC)
FOUR_MINUTES_AGO = NOW - timedelta(minutes=4)


def test_a_read_at_the_latest_batch_is_current():
    line = as_of(Read(FOUR_MINUTES_AGO, 93), latest_batch_id=93, next_read_at=NOW + timedelta(minutes=6), now=NOW)

    assert (line.batches_behind, line.is_behind, line.is_next_read_late) == (0, False, False)
    assert line.next_read_in == timedelta(minutes=6)


def test_a_read_at_batch_59_while_the_query_is_at_93_is_34_batches_behind():
    line = as_of(Read(FOUR_MINUTES_AGO, 59), latest_batch_id=93, next_read_at=NOW + timedelta(minutes=6), now=NOW)

    assert (line.batches_behind, line.is_behind, line.latest_batch_id) == (34, True, 93)


def test_a_panel_never_read_is_not_behind_and_says_when_its_first_read_is():
    line = as_of(None, latest_batch_id=93, next_read_at=NOW + timedelta(seconds=20), now=NOW)

    assert (line.read, line.batches_behind, line.is_behind) == (None, 0, False)
    assert line.next_read_in == timedelta(seconds=20)


def test_a_read_that_recorded_no_batch_is_never_behind():
    # Rows stored before the batch was recorded, or a pass over a checkpoint with no batch yet.
    line = as_of(Read(FOUR_MINUTES_AGO, None), latest_batch_id=93, next_read_at=None, now=NOW)

    assert (line.batches_behind, line.is_behind) == (0, False)


def test_state_one_batch_behind_is_current_because_the_running_batch_has_no_version_yet():
    one = as_of(Read(FOUR_MINUTES_AGO, 92), latest_batch_id=93, next_read_at=None, now=NOW, batches_in_flight=1)
    two = as_of(Read(FOUR_MINUTES_AGO, 91), latest_batch_id=93, next_read_at=None, now=NOW, batches_in_flight=1)

    assert (one.batches_behind, one.is_behind) == (1, False)
    assert (two.batches_behind, two.is_behind) == (2, True)


def test_a_next_read_past_its_time_is_due_now_and_late_after_a_minute():
    due = as_of(Read(FOUR_MINUTES_AGO, 93), latest_batch_id=93, next_read_at=NOW - timedelta(seconds=60), now=NOW)
    late = as_of(Read(FOUR_MINUTES_AGO, 93), latest_batch_id=93, next_read_at=NOW - timedelta(seconds=61), now=NOW)

    assert (due.next_read_in, due.is_next_read_late) == (timedelta(0), False)
    assert (late.next_read_in, late.is_next_read_late) == (timedelta(0), True)


def test_the_next_sync_is_one_interval_after_the_last_and_due_now_before_the_first():
    synced = Checkpoint(sync_interval_seconds=30, last_synced_at=NOW - timedelta(seconds=10))
    never = Checkpoint(sync_interval_seconds=30)

    assert sync_as_of(synced, None, now=NOW).next_read_at == NOW + timedelta(seconds=20)
    assert sync_as_of(never, None, now=NOW).next_read_at == NOW


def test_a_checkpoint_that_is_not_synced_has_no_next_read():
    disabled = Checkpoint(is_enabled=False, last_synced_at=FOUR_MINUTES_AGO)
    archived = Checkpoint(archived_at=FOUR_MINUTES_AGO, last_synced_at=FOUR_MINUTES_AGO)

    assert sync_as_of(disabled, None, now=NOW).next_read_at is None
    assert full_pass_as_of(archived, None, now=NOW, interval_seconds=600).next_read_at is None


def test_the_full_pass_runs_with_the_first_sync_after_its_interval():
    checkpoint = Checkpoint(
        sync_interval_seconds=30,
        last_synced_at=NOW - timedelta(seconds=10),
        last_inspected_at=FOUR_MINUTES_AGO,
        latest_batch_id=93,
        last_inspected_batch_id=59,
    )
    read = Read(checkpoint.last_inspected_at, checkpoint.last_inspected_batch_id)

    in_ten_minutes = full_pass_as_of(checkpoint, read, now=NOW, interval_seconds=600)
    interval_passed = full_pass_as_of(checkpoint, read, now=NOW, interval_seconds=60)

    assert in_ten_minutes.next_read_at == FOUR_MINUTES_AGO + timedelta(minutes=10)
    assert interval_passed.next_read_at == NOW + timedelta(seconds=20)  # the next sync
    assert (in_ten_minutes.batches_behind, in_ten_minutes.is_behind) == (34, True)


def test_state_read_at_version_16_is_as_of_batch_15():
    assert state_read(16, FOUR_MINUTES_AGO) == Read(FOUR_MINUTES_AGO, 15)
    assert state_read(None, FOUR_MINUTES_AGO) == Read(FOUR_MINUTES_AGO, None)
    assert state_read(16, None) is None
