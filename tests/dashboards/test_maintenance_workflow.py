"""The maintenance workflow on the real database: request, plan, confirm, approve, run, audit.

The plans are made by the library's real planners on copies of PySpark-written checkpoints; the
tasks are called as the worker would call them.
"""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from dashboards.models import AuditEntry, MaintenanceRefused, MaintenanceRun
from factories import long_stateless_history, make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers import maintenance_actions, maintenance_runs
from workers.sync import sync_checkpoint

pytestmark = pytest.mark.django_db

BATCHES = 12


@pytest.fixture
def oncall_user(django_user_model, oncall_group):
    user = django_user_model.objects.create_user("olga", password="oncall-password")
    user.groups.add(oncall_group)
    return user


@pytest.fixture
def second_oncall_user(django_user_model, oncall_group):
    user = django_user_model.objects.create_user("oscar", password="oncall-password")
    user.groups.add(oncall_group)
    return user


@pytest.fixture
def stopped_checkpoint(copy_checkpoint):
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    long_stateless_history(directory, batches=BATCHES)
    return make_checkpoint(url=str(directory)), directory


def _request(checkpoint, user, *, keep_batches=3) -> MaintenanceRun:
    run = MaintenanceRun.objects.create(
        checkpoint=checkpoint, action="purge", parameters={"keep_batches": keep_batches}, requested_by=user
    )
    return maintenance_runs.make_plan(run.pk)


def _names(directory, log):
    return sorted(int(p.name) for p in (directory / log).iterdir() if p.name.isdigit())


def test_a_plan_lists_each_file_the_purge_deletes_with_its_crc_and_changes_nothing(stopped_checkpoint, oncall_user):
    checkpoint, directory = stopped_checkpoint

    run = _request(checkpoint, oncall_user)

    assert run.status == MaintenanceRun.Status.PLANNED
    plan = run.maintenance_plan
    deleted = {d.path for d in plan.deletes}
    expected = {f"{log}/{n}" for log in ("offsets", "commits") for n in range(BATCHES - 3)}
    assert {p for p in deleted if not p.split("/")[1].startswith(".")} == expected
    assert {p for p in deleted if p.split("/")[1].startswith(".")} == {
        f"{log}/.{n}.crc" for log in ("offsets", "commits") for n in range(BATCHES - 3)
    }
    assert plan.bytes_freed == sum((directory / p).stat().st_size for p in deleted)
    assert all(p.ok for p in plan.preconditions)
    assert _names(directory, "offsets") == list(range(BATCHES))
    assert [e.event for e in run.audit_entries.order_by("pk")] == [AuditEntry.Event.PLANNED]


def test_confirming_and_running_deletes_exactly_the_plan_and_records_every_step(stopped_checkpoint, oncall_user):
    checkpoint, directory = stopped_checkpoint
    run = _request(checkpoint, oncall_user)

    run.confirm(oncall_user, reason="disk almost full", override_query_running=False, now=timezone.now())
    run = maintenance_runs.execute_run(run.pk, owner="test-worker")

    assert run.status == MaintenanceRun.Status.SUCCEEDED, run.error
    assert _names(directory, "offsets") == _names(directory, "commits") == list(range(BATCHES - 3, BATCHES))
    assert sorted(p.name for p in (directory / "offsets").iterdir() if p.name.startswith(".")) == [
        f".{n}.crc" for n in sorted(range(BATCHES - 3, BATCHES), key=str)
    ]
    assert run.result["bytes_freed"] == run.maintenance_plan.bytes_freed
    assert run.steps_done == run.steps_total == len(run.maintenance_plan.deletes)
    events = list(run.audit_entries.order_by("pk").values_list("event", "actor_name"))
    assert events == [
        ("planned", "worker"),
        ("confirmed", "olga"),
        ("started", "worker"),
        ("succeeded", "worker"),
    ]
    assert run.audit_entries.get(event="confirmed").detail == "disk almost full"


def test_a_recently_written_batch_refuses_confirmation_unless_overridden_and_the_override_is_audited(
    stopped_checkpoint, oncall_user
):
    checkpoint, directory = stopped_checkpoint
    os.utime(directory / "offsets" / str(BATCHES - 1))  # a batch written just now: the query runs
    run = _request(checkpoint, oncall_user)
    assert run.status == MaintenanceRun.Status.PLANNED
    assert [p.name for p in run.maintenance_plan.failed_preconditions()] == ["query-stopped"]

    with pytest.raises(MaintenanceRefused, match="query-stopped"):
        run.confirm(oncall_user, reason="now", override_query_running=False, now=timezone.now())
    run.confirm(oncall_user, reason="query is wedged, purging anyway", override_query_running=True, now=timezone.now())
    run = maintenance_runs.execute_run(run.pk, owner="test-worker")

    assert run.status == MaintenanceRun.Status.SUCCEEDED, run.error
    assert run.audit_entries.filter(event="overridden", actor_name="olga").exists()


def test_a_purge_keeps_the_uncommitted_batch_and_the_latest_commit_whatever_it_is_asked(
    stopped_checkpoint, oncall_user
):
    checkpoint, directory = stopped_checkpoint
    (directory / "commits" / str(BATCHES - 1)).unlink()  # the query died inside the last batch

    run = _request(checkpoint, oncall_user, keep_batches=1)
    run.confirm(oncall_user, reason="keep the minimum", override_query_running=False, now=timezone.now())
    run = maintenance_runs.execute_run(run.pk, owner="test-worker")

    assert run.status == MaintenanceRun.Status.SUCCEEDED, run.error
    assert _names(directory, "offsets") == [BATCHES - 2, BATCHES - 1]
    assert _names(directory, "commits") == [BATCHES - 2]


def test_a_second_person_must_approve_when_approval_is_required(
    stopped_checkpoint, oncall_user, second_oncall_user, settings
):
    settings.MAINTENANCE_REQUIRES_APPROVAL = True
    checkpoint, directory = stopped_checkpoint
    run = _request(checkpoint, oncall_user)

    run.confirm(oncall_user, reason="weekly purge", override_query_running=False, now=timezone.now())
    assert run.status == MaintenanceRun.Status.AWAITING_APPROVAL
    with pytest.raises(MaintenanceRefused, match="someone other"):
        run.approve(oncall_user, now=timezone.now())
    run.approve(second_oncall_user, now=timezone.now())

    assert MaintenanceRun.objects.get(pk=run.pk).status == MaintenanceRun.Status.QUEUED
    assert run.audit_entries.filter(event="approved", actor_name="oscar").exists()
    assert _names(directory, "offsets") == list(range(BATCHES))


def test_only_one_run_per_checkpoint_may_be_queued_or_running(stopped_checkpoint, oncall_user):
    checkpoint, _ = stopped_checkpoint
    first, second = _request(checkpoint, oncall_user), _request(checkpoint, oncall_user)

    first.confirm(oncall_user, reason="first", override_query_running=False, now=timezone.now())
    with pytest.raises(MaintenanceRefused, match="another maintenance run"):
        second.confirm(oncall_user, reason="second", override_query_running=False, now=timezone.now())
    assert MaintenanceRun.objects.get(pk=second.pk).status == MaintenanceRun.Status.PLANNED


def test_a_plan_older_than_the_limit_cannot_be_confirmed(stopped_checkpoint, oncall_user, settings):
    checkpoint, _ = stopped_checkpoint
    run = _request(checkpoint, oncall_user)
    later = timezone.now() + timedelta(seconds=settings.MAINTENANCE_PLAN_MAX_AGE_SECONDS + 1)

    with pytest.raises(MaintenanceRefused, match="too old"):
        run.confirm(oncall_user, reason="late", override_query_running=False, now=later)


def test_a_run_whose_worker_died_is_resumed_and_finishes_the_same_plan(stopped_checkpoint, oncall_user):
    checkpoint, directory = stopped_checkpoint
    run = _request(checkpoint, oncall_user)
    run.confirm(oncall_user, reason="purge", override_query_running=False, now=timezone.now())
    # The first worker took the run and deleted the three oldest offsets before it died.
    assert MaintenanceRun.objects.take_lease(
        run.pk, owner="dead-worker", now=timezone.now() - timedelta(hours=1), seconds=1
    )
    MaintenanceRun.objects.filter(pk=run.pk).update(attempts=1, started_at=timezone.now() - timedelta(hours=1))
    for n in range(3):
        (directory / "offsets" / f".{n}.crc").unlink()
        (directory / "offsets" / str(n)).unlink()

    assert maintenance_runs.interrupted_run_ids() == [run.pk]
    run = maintenance_runs.execute_run(run.pk, owner="second-worker")

    assert run.status == MaintenanceRun.Status.SUCCEEDED, run.error
    assert _names(directory, "offsets") == _names(directory, "commits") == list(range(BATCHES - 3, BATCHES))
    assert run.attempts == 2
    assert len(run.result["skipped"]) == 6  # the three offsets and their CRCs, already gone
    assert run.audit_entries.filter(event="resumed").exists()


def test_a_live_worker_keeps_its_run(stopped_checkpoint, oncall_user):
    checkpoint, directory = stopped_checkpoint
    run = _request(checkpoint, oncall_user)
    run.confirm(oncall_user, reason="purge", override_query_running=False, now=timezone.now())
    assert MaintenanceRun.objects.take_lease(run.pk, owner="live-worker", now=timezone.now(), seconds=600)

    again = maintenance_runs.execute_run(run.pk, owner="other-worker")

    assert again.worker == "live-worker" and again.status == MaintenanceRun.Status.RUNNING
    assert _names(directory, "offsets") == list(range(BATCHES))


def test_a_worker_that_stalled_past_its_lease_leaves_the_run_to_the_worker_that_took_it_over(
    stopped_checkpoint, oncall_user, monkeypatch
):
    checkpoint, directory = stopped_checkpoint
    run = _request(checkpoint, oncall_user)
    run.confirm(oncall_user, reason="purge", override_query_running=False, now=timezone.now())
    real_apply = maintenance_actions.apply

    def stall_then_apply(checkpoint, parameters, plan, *, on_step):
        # While this worker stalled, its lease expired and another worker took the run over.
        later = timezone.now() + timedelta(hours=1)
        assert MaintenanceRun.objects.take_lease(run.pk, owner="second-worker", now=later, seconds=600)
        return real_apply(checkpoint, parameters, plan, on_step=on_step)

    monkeypatch.setattr(maintenance_actions, "apply", stall_then_apply)
    stalled = maintenance_runs.execute_run(run.pk, owner="stalled-worker")

    assert (stalled.status, stalled.worker, stalled.error) == (MaintenanceRun.Status.RUNNING, "second-worker", "")
    assert not run.audit_entries.filter(event__in=["failed", "succeeded"]).exists()

    monkeypatch.setattr(maintenance_actions, "apply", real_apply)
    MaintenanceRun.objects.filter(pk=run.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    finished = maintenance_runs.execute_run(run.pk, owner="second-worker")

    assert finished.status == MaintenanceRun.Status.SUCCEEDED, finished.error
    assert _names(directory, "offsets") == _names(directory, "commits") == list(range(BATCHES - 3, BATCHES))


def test_a_checkpoint_that_cannot_be_read_gets_a_refusal_naming_the_reason(checkpoint_roots, oncall_user):
    checkpoint = make_checkpoint(url=str(checkpoint_roots / "gone"))
    (checkpoint_roots / "gone").mkdir()
    (checkpoint_roots / "gone" / "offsets").write_text("not a directory")

    run = _request(checkpoint, oncall_user)

    assert run.status in (MaintenanceRun.Status.REFUSED, MaintenanceRun.Status.NOTHING_TO_DO)
    assert run.audit_entries.exists()


def test_live_progress_from_the_listener_counts_as_a_running_query(stopped_checkpoint, oncall_user):
    from dashboards.models import BatchProgress, StreamingQuery

    checkpoint, _ = stopped_checkpoint
    query = StreamingQuery.objects.create(query_id="11111111-2222-3333-4444-555555555555")
    checkpoint.query = query
    checkpoint.save(update_fields=["query"])
    BatchProgress.objects.create(
        query=query, batch_id=BATCHES, timestamp=timezone.now(), origin="listener", received_at=timezone.now()
    )

    run = _request(checkpoint, oncall_user)

    failed = run.maintenance_plan.failed_preconditions()
    assert [p.name for p in failed] == ["query-stopped"] and "progress" in failed[0].detail


def test_live_progress_of_a_copy_ahead_of_this_checkpoint_does_not_make_it_running(stopped_checkpoint, oncall_user):
    from dashboards.models import BatchProgress

    checkpoint, _ = stopped_checkpoint
    sync_checkpoint(checkpoint.pk)
    checkpoint.refresh_from_db()
    # The live query this checkpoint was copied from (same query id) reports batches past this copy's.
    for batch_id in (checkpoint.latest_batch_id + 2, checkpoint.latest_batch_id + 20):
        BatchProgress.objects.create(
            query=checkpoint.query,
            batch_id=batch_id,
            timestamp=timezone.now(),
            origin="listener",
            received_at=timezone.now(),
        )

    run = _request(checkpoint, oncall_user)

    (stopped,) = [p for p in run.maintenance_plan.preconditions if p.name == "query-stopped"]
    assert stopped.ok and "no progress received for this checkpoint's batches" in stopped.detail.split("; ")


def test_batches_that_syncs_saw_arrive_count_as_a_running_query_however_old_their_files_look(
    stopped_checkpoint, oncall_user
):
    # A writer whose clock is a day behind dates its files a day back: by file dates the query
    # has been idle for a day. Two syncs a moment apart, the second finding new batches, say otherwise.
    checkpoint, directory = stopped_checkpoint
    sync_checkpoint(checkpoint.pk)
    long_stateless_history(directory, batches=BATCHES + 2, idle_seconds=86400)
    assert sync_checkpoint(checkpoint.pk).new_batches == 2

    plan = _request(checkpoint, oncall_user).maintenance_plan

    (stopped,) = [p for p in plan.preconditions if p.name == "query-stopped"]
    assert not stopped.ok and stopped.detail.startswith("a sync ")  # the failing judgement first
    assert "found 2 new batches" in stopped.detail and "; no batch written for 864" in stopped.detail
    assert [p.name for p in plan.failed_preconditions()] == ["query-stopped"]


def test_a_first_sync_or_syncs_that_found_nothing_new_say_nothing_about_a_running_query(
    stopped_checkpoint, oncall_user
):
    checkpoint, _ = stopped_checkpoint
    assert sync_checkpoint(checkpoint.pk).new_batches == BATCHES  # everything is new to a first sync
    sync_checkpoint(checkpoint.pk)

    plan = _request(checkpoint, oncall_user).maintenance_plan

    assert plan.failed_preconditions() == ()
    assert any(p.name == "query-stopped" and "no sync in the last" in p.detail for p in plan.preconditions)


def test_audit_entries_cannot_be_changed(stopped_checkpoint, oncall_user):
    checkpoint, _ = stopped_checkpoint
    entry = _request(checkpoint, oncall_user).audit_entries.get()
    entry.detail = "rewritten history"
    with pytest.raises(ValueError):
        entry.save()


def test_a_failed_login_is_audited_without_the_password(client):
    client.post(reverse("login"), {"username": "mallory", "password": "guess-1"})

    entry = AuditEntry.objects.get(event="login-failed")
    assert entry.actor_name == "mallory" and "guess-1" not in entry.detail


def _policy(checkpoint, user, **fields):
    from dashboards.models import MaintenancePolicy

    defaults = {
        "action": "purge",
        "parameters": {"keep_batches": 3},
        "interval_seconds": 600,
        "reason": "nightly purge",
    }
    return MaintenancePolicy.objects.create(checkpoint=checkpoint, created_by=user, **{**defaults, **fields})


def test_a_policy_is_a_periodic_task_of_celery_beat(stopped_checkpoint, oncall_user):
    from django_celery_beat.models import PeriodicTask

    checkpoint, _ = stopped_checkpoint
    policy = _policy(checkpoint, oncall_user)

    task = PeriodicTask.objects.get(name=f"maintenance policy {policy.pk}")
    assert (task.task, task.args, task.interval.every, task.enabled) == (
        "workers.tasks.run_maintenance_policy",
        f"[{policy.pk}]",
        600,
        True,
    )
    policy.delete()
    assert not PeriodicTask.objects.filter(name=f"maintenance policy {policy.pk}").exists()


def test_a_policy_runs_its_action_when_every_precondition_holds(stopped_checkpoint, oncall_user):
    checkpoint, directory = stopped_checkpoint
    policy = _policy(checkpoint, oncall_user)

    run_id = maintenance_runs.start_policy_run(policy.pk)
    run = maintenance_runs.execute_run(run_id, owner="beat-worker")

    assert run.status == MaintenanceRun.Status.SUCCEEDED and run.policy == policy and run.confirmed_by is None
    assert _names(directory, "offsets") == list(range(BATCHES - 3, BATCHES))
    assert list(run.audit_entries.order_by("pk").values_list("event", "actor_name"))[:3] == [
        ("plan-requested", "policy"),
        ("planned", "worker"),
        ("confirmed", "policy"),
    ]


def test_a_policy_never_overrides_a_running_query(stopped_checkpoint, oncall_user):
    checkpoint, directory = stopped_checkpoint
    os.utime(directory / "commits" / str(BATCHES - 1))
    policy = _policy(checkpoint, oncall_user)

    assert maintenance_runs.start_policy_run(policy.pk) is None

    run = MaintenanceRun.objects.get(policy=policy)
    assert run.status == MaintenanceRun.Status.REFUSED and "query-stopped" in run.error
    assert _names(directory, "offsets") == list(range(BATCHES))


def test_a_policy_with_parameters_the_action_does_not_take_is_refused_with_the_reason(stopped_checkpoint, oncall_user):
    checkpoint, _ = stopped_checkpoint
    policy = _policy(checkpoint, oncall_user, parameters={"keep_batchez": 3})

    assert maintenance_runs.start_policy_run(policy.pk) is None
    assert "keep_batchez" in MaintenanceRun.objects.get(policy=policy).plan_error
