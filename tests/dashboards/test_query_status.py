"""The health model on hand-made facts: each state, its reason, and which state wins."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from dashboards.health.query_status import State, StatusFacts, Thresholds, assess, learn_trigger_interval

NOW = datetime(2026, 11, 25, 12, 0, 0, tzinfo=UTC)
THRESHOLDS = Thresholds(stopped_after_seconds=300, stalled_after_seconds=120, behind_ratio=1.2)
# A query with a 10 s trigger whose batch 178 was planned 4 s ago and committed, synced 2 s ago.
LIVE = StatusFacts(
    sync_interval_seconds=10,
    last_synced_at=NOW - timedelta(seconds=2),
    latest_batch_id=178,
    latest_batch_at=NOW - timedelta(seconds=4),
    latest_committed_batch_id=178,
    trigger_interval_seconds=10,
    typical_gap_seconds=10,
    recent_batch_duration_seconds=1.5,
    recent_input_rate=100.0,
    recent_process_rate=400.0,
    last_heard_at=NOW - timedelta(seconds=5),
    last_heard_input_rows=1000,
)


def status_of(facts: StatusFacts, *, now: datetime = NOW):
    return assess(facts, now=now, thresholds=THRESHOLDS)


def test_a_query_with_fresh_batches_is_running():
    status = status_of(LIVE)

    assert status.state is State.RUNNING
    assert status.reason == "batch 178 committed, started 11:59:56 UTC, a batch every 10 s"
    assert status.severity == "ok"
    assert status.also == ()


def test_a_running_query_whose_newest_batch_is_not_committed_yet_says_it_is_running():
    status = status_of(replace(LIVE, latest_batch_id=179, latest_batch_at=NOW - timedelta(seconds=1)))

    assert status.state is State.RUNNING
    assert status.reason == "batch 179 running since 11:59:59 UTC, a batch every 10 s"


def test_progress_with_no_input_rows_after_the_newest_batch_is_idle():
    idle = replace(
        LIVE,
        latest_batch_at=NOW - timedelta(minutes=20),
        last_heard_at=NOW - timedelta(seconds=3),
        last_heard_input_rows=0,
    )

    status = status_of(idle)

    assert status.state is State.IDLE
    assert status.reason == "running, no new data since batch 178 (20 min ago)"
    assert status.since == NOW - timedelta(minutes=20)


def test_no_batch_and_no_progress_for_the_quiet_period_is_stopped_since_the_last_sign_of_life():
    stopped = replace(
        LIVE, latest_batch_at=NOW - timedelta(minutes=9), last_heard_at=NOW - timedelta(minutes=8, seconds=50)
    )

    status = status_of(stopped)

    assert status.state is State.STOPPED
    assert status.since == NOW - timedelta(minutes=8, seconds=50)
    assert status.reason == "no new batch for 9 min (batch 178) and no progress since 2026-11-25 11:51:10 UTC"
    assert status.severity == "warning"


def test_without_progress_a_silent_query_is_stopped_and_the_reason_says_how_to_tell_idle_from_stopped():
    silent = replace(LIVE, latest_batch_at=NOW - timedelta(minutes=6), last_heard_at=None, last_heard_input_rows=None)

    status = status_of(silent)

    assert status.state is State.STOPPED
    assert "add the listener or register the event log" in status.reason


def test_the_quiet_period_grows_with_the_gaps_between_batches():
    # Batches every 10 minutes: 9 minutes of silence is normal, 31 minutes is not.
    hourly = replace(LIVE, trigger_interval_seconds=None, typical_gap_seconds=600, last_heard_at=None)

    assert status_of(replace(hourly, latest_batch_at=NOW - timedelta(minutes=9))).state is State.RUNNING
    assert status_of(replace(hourly, latest_batch_at=NOW - timedelta(minutes=31))).state is State.STOPPED


def test_a_planned_batch_not_committed_for_ten_usual_durations_is_stalled():
    stuck = replace(
        LIVE,
        latest_batch_id=179,
        latest_batch_at=NOW - timedelta(minutes=14),
        recent_batch_duration_seconds=2.1,
        last_heard_at=NOW - timedelta(minutes=14, seconds=5),
    )

    status = status_of(stuck)

    assert status.state is State.STALLED
    assert status.reason == (
        "batch 179 was planned 14 min ago and is not committed; batches usually take 2.1 s: "
        "the query died or hangs in it (a restart runs it again)"
    )
    assert status.also == (), "a stalled batch is not also reported as a stopped query"


def test_a_batch_running_within_its_usual_time_is_not_stalled():
    running_batch = replace(LIVE, latest_batch_id=179, latest_batch_at=NOW - timedelta(seconds=30))

    assert status_of(running_batch).state is State.RUNNING


def test_input_faster_than_processing_is_falling_behind():
    behind = replace(LIVE, recent_input_rate=1200.0, recent_process_rate=800.0)

    status = status_of(behind)

    assert status.state is State.FALLING_BEHIND
    assert status.reason == (
        "input 1,200.0 rows/s but processed 800.0 rows/s over the recent batches "
        "(no source reports how far it is behind its head: judged by input rate against process rate)"
    )


def test_batches_longer_than_the_trigger_interval_are_falling_behind():
    behind = replace(LIVE, recent_batch_duration_seconds=14.0)

    status = status_of(behind)

    assert status.state is State.FALLING_BEHIND
    assert status.reason == (
        "batches take 14 s but the trigger interval is 10 s "
        "(no source reports how far it is behind its head: judged by batch duration against the trigger interval)"
    )


def test_a_lag_that_grew_over_the_recent_batches_is_falling_behind():
    behind = replace(LIVE, recent_offsets_behind=9_800, earlier_offsets_behind=1_200)

    status = status_of(behind)

    assert status.state is State.FALLING_BEHIND
    assert status.reason == (
        "the sources are 9,800 offsets behind their head, up from 1,200 over the recent batches "
        "(judged by the lag the sources report)"
    )


def test_a_lag_that_grew_from_nothing_is_falling_behind():
    behind = replace(LIVE, recent_offsets_behind=40, earlier_offsets_behind=0)

    assert status_of(behind).state is State.FALLING_BEHIND


@pytest.mark.parametrize(
    ("earlier", "recent"),
    [(0, 0), (5_000, 5_000), (5_000, 6_000), (9_800, 1_200)],
    ids=["none", "flat", "within", "shrinking"],
)
def test_a_reported_lag_that_did_not_grow_past_the_ratio_decides_over_the_rates(earlier, recent):
    """Input outran processing, but the sources say they are not further behind: the lag wins."""
    keeping_up = replace(
        LIVE,
        recent_input_rate=1200.0,
        recent_process_rate=800.0,
        recent_offsets_behind=recent,
        earlier_offsets_behind=earlier,
    )

    assert status_of(keeping_up).state is State.RUNNING


def test_without_a_known_trigger_long_batches_are_not_falling_behind():
    back_to_back = replace(
        LIVE,
        trigger_interval_seconds=None,
        recent_batch_duration_seconds=14.0,
        recent_input_rate=100.0,
        recent_process_rate=100.0,
    )

    assert status_of(back_to_back).state is State.RUNNING


def test_a_failed_last_sync_is_failing_to_sync_and_names_the_error():
    failing = replace(LIVE, last_sync_failed=True, last_sync_message="s3://bucket/q1: connection refused")

    status = status_of(failing)

    assert status.state is State.FAILING_TO_SYNC
    assert status.reason == "the last sync failed: s3://bucket/q1: connection refused"
    assert status.severity == "error"


def test_no_sync_for_three_intervals_is_failing_to_sync():
    late = replace(LIVE, last_synced_at=NOW - timedelta(seconds=91 + 60))

    status = status_of(late)

    assert status.state is State.FAILING_TO_SYNC
    assert status.reason.startswith("no sync for 2 min 31 s (every 10 s expected)")


def test_unreadable_files_are_failing_to_sync():
    assert status_of(replace(LIVE, unreadable_files=3)).reason == "3 files cannot be read (see the sync panel)"


def test_open_integrity_errors_are_damaged_and_come_after_a_failing_sync():
    damaged = replace(LIVE, error_findings=2)
    both = replace(damaged, last_sync_failed=True, last_sync_message="boom")

    assert status_of(damaged).state is State.DAMAGED
    assert status_of(damaged).reason == "2 integrity errors: a restart would fail (see the integrity panel)"
    assert [c.state for c in status_of(both).conditions] == [State.FAILING_TO_SYNC, State.DAMAGED]


def test_a_path_that_is_no_checkpoint_says_what_was_found():
    missing = StatusFacts(root_problem="/data/q9 does not exist", last_synced_at=NOW)

    status = status_of(missing)

    assert status.state is State.NOT_A_CHECKPOINT
    assert status.reason == "/data/q9 does not exist"
    assert status.also == ()


def test_a_checkpoint_without_batches_has_not_started():
    assert status_of(StatusFacts(last_synced_at=NOW)).state is State.NOT_STARTED
    assert status_of(StatusFacts()).reason == "not synced yet: the first sync is queued"


def test_a_disabled_checkpoint_is_judged_only_on_what_does_not_age():
    disabled = replace(
        LIVE,
        is_enabled=False,
        last_synced_at=NOW - timedelta(days=2),
        latest_batch_at=NOW - timedelta(days=2),
        last_heard_at=None,
        error_findings=1,
    )

    status = status_of(disabled)

    assert [c.state for c in status.conditions] == [State.SYNC_DISABLED, State.DAMAGED]
    assert status.reason == "ckptweb does not sync this checkpoint; figures as of 2026-11-23 12:00:00 UTC"


@pytest.mark.parametrize(
    ("gaps", "durations", "expected"),
    [
        ([10.0, 10.1, 9.9, 10.0, 10.0, 10.2], [1.0, 1.5, 2.0], 10.0),  # ProcessingTime(10 s), batches end early
        ([10.0, 10.1, 9.9, 10.0, 10.0, 10.2], [9.5, 9.9, 10.0], None),  # regular, but back to back
        ([1.0, 3.0, 0.5, 7.0, 2.0, 4.0], [1.0, 3.0, 0.5], None),  # the default trigger: gaps vary with durations
        ([10.0, 10.0, 10.0], [1.0], None),  # too few gaps to tell
        ([10.0, 10.0, 10.0, 10.0], [], None),  # no durations (no progress): cannot tell a trigger from back to back
    ],
)
def test_a_trigger_interval_is_learned_only_from_regular_batches_that_kept_up(gaps, durations, expected):
    assert learn_trigger_interval(gaps, durations) == expected


def test_a_copy_behind_another_checkpoint_of_its_query_is_stopped_and_says_whose_copy_it_is():
    # Copied (cp -a) from LIVE's checkpoint and registered 2 s later; LIVE's progress keeps arriving.
    copy = replace(LIVE, copy_of="orders", copy_of_batch_id=181, registered_at=NOW - timedelta(seconds=2))

    status = status_of(copy)

    assert status.state is State.STOPPED
    assert status.reason == (
        "a copy of orders (same query id, at batch 181): its own batches end at batch 178, "
        "planned 2026-11-25 11:59:56 UTC; later progress belongs to orders"
    )
    assert status.since == LIVE.latest_batch_at
    assert [condition.state for condition in status.conditions] == [State.STOPPED]


def test_a_copy_that_planned_a_batch_since_it_was_registered_runs_on_its_own_evidence():
    copy = replace(LIVE, copy_of="orders", copy_of_batch_id=181, registered_at=NOW - timedelta(seconds=60))

    assert status_of(copy).state is State.RUNNING
