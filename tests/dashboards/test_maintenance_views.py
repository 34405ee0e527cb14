"""Maintenance pages: who may do what, the two-step confirmation, what the pages show."""
from __future__ import annotations

import pytest
from django.urls import reverse

from dashboards.models import AuditEntry, MaintenanceRun
from factories import long_stateless_history, make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers import maintenance_runs

pytestmark = pytest.mark.django_db


@pytest.fixture
def checkpoint(copy_checkpoint):
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    long_stateless_history(directory, batches=12)
    return make_checkpoint(url=str(directory))


@pytest.fixture
def planned_run(checkpoint):
    run = MaintenanceRun.objects.create(checkpoint=checkpoint, action="purge", parameters={"keep_batches": 3})
    return maintenance_runs.make_plan(run.pk)


def _url(name, run):
    return reverse(f"dashboards:{name}", args=[run.checkpoint_id, run.pk])


def test_asking_for_a_plan_creates_a_run_and_queues_the_planner(oncall_client, checkpoint, django_capture_on_commit_callbacks, eager_celery):
    with django_capture_on_commit_callbacks(execute=True):
        response = oncall_client.post(
            reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "purge", "keep_batches": "3"}
        )

    run = MaintenanceRun.objects.get()
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert run.parameters == {"keep_batches": 3}
    assert run.status == MaintenanceRun.Status.PLANNED  # the eager task made the plan
    assert list(run.audit_entries.order_by("pk").values_list("event", flat=True)) == ["plan-requested", "planned"]


def test_a_request_without_the_actions_threshold_is_rejected_with_the_field_named(oncall_client, checkpoint):
    response = oncall_client.post(reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "purge", "keep_batches": ""})

    assert response.status_code == 400
    assert "Required for this action." in response.content.decode()
    assert not MaintenanceRun.objects.exists()


@pytest.mark.parametrize("name", ["maintenance-confirm", "maintenance-approve", "maintenance-cancel"])
def test_a_viewer_may_read_a_plan_but_not_act_on_it(viewer_client, planned_run, name):
    assert viewer_client.get(_url("maintenance-run", planned_run)).status_code == 200
    response = viewer_client.post(_url(name, planned_run), {"reason": "because", "checkpoint_name": "orders"})

    assert response.status_code == 403
    assert MaintenanceRun.objects.get(pk=planned_run.pk).status == MaintenanceRun.Status.PLANNED


def test_a_viewer_may_not_ask_for_a_plan(viewer_client, checkpoint):
    response = viewer_client.post(reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "purge", "keep_batches": "3"})
    assert response.status_code == 403


def test_the_run_page_shows_every_file_of_the_plan_and_its_preconditions(oncall_client, planned_run):
    page = oncall_client.get(_url("maintenance-run", planned_run)).content.decode()

    for delete in planned_run.maintenance_plan.deletes:
        assert f'<td class="mono">{delete.path}</td>' in page
    for precondition in planned_run.maintenance_plan.preconditions:
        assert precondition.name in page
    assert "Confirm and run" in page


def test_confirming_needs_the_checkpoint_name_typed_exactly(oncall_client, planned_run, django_capture_on_commit_callbacks):
    response = oncall_client.post(_url("maintenance-confirm", planned_run), {"reason": "disk full", "checkpoint_name": "order"})

    assert response.status_code == 400
    assert "exactly to confirm" in response.content.decode()
    assert MaintenanceRun.objects.get(pk=planned_run.pk).status == MaintenanceRun.Status.PLANNED


def test_a_confirmed_run_is_queued_for_the_worker(oncall_client, planned_run, django_capture_on_commit_callbacks, monkeypatch):
    from workers import tasks

    queued = []
    monkeypatch.setattr(tasks.run_maintenance, "apply_async", lambda args: queued.extend(args))
    with django_capture_on_commit_callbacks(execute=True):
        response = oncall_client.post(_url("maintenance-confirm", planned_run), {"reason": "disk full", "checkpoint_name": "orders"})

    assert response.status_code == 302
    assert MaintenanceRun.objects.get(pk=planned_run.pk).status == MaintenanceRun.Status.QUEUED
    assert queued == [planned_run.pk]


def test_the_polled_panel_asks_for_a_reload_when_the_status_changed(oncall_client, planned_run):
    same = oncall_client.get(_url("maintenance-run-panel", planned_run) + "?shown=planned")
    changed = oncall_client.get(_url("maintenance-run-panel", planned_run) + "?shown=planning")

    assert "HX-Refresh" not in same
    assert changed["HX-Refresh"] == "true"


def test_the_audit_trail_lists_entries_and_filters_by_checkpoint(viewer_client, planned_run):
    other = make_checkpoint(name="other", url="/nowhere")
    AuditEntry.record(AuditEntry.Event.PLAN_REQUESTED, actor_name="someone", checkpoint=other, detail="elsewhere")

    page = viewer_client.get(reverse("dashboards:audit-log") + f"?checkpoint={planned_run.checkpoint_id}").content.decode()

    assert "elsewhere" not in page
    assert planned_run.audit_entries.get().get_event_display() in page


def test_the_admin_cannot_edit_or_delete_audit_entries(admin_client, planned_run):
    entry = planned_run.audit_entries.get()
    change = admin_client.post(reverse("admin:dashboards_auditentry_change", args=[entry.pk]), {"detail": "x"})
    delete = admin_client.post(reverse("admin:dashboards_auditentry_delete", args=[entry.pk]), {"post": "yes"})

    assert AuditEntry.objects.get(pk=entry.pk).detail == entry.detail
    assert change.status_code in (403, 302) and delete.status_code in (403, 302)


@pytest.fixture
def broker_down(monkeypatch):
    """The Celery app pointed at a Redis port nothing listens on."""
    from ckptweb.celery import app

    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:9/0")
    monkeypatch.setattr(app, "_pool", None)
    monkeypatch.setattr(app.amqp, "_producer_pool", None)
    yield
    app._pool = None
    app.amqp._producer_pool = None


@pytest.mark.django_db(transaction=True)  # real commits: the message is sent while the view runs
def test_a_request_made_while_the_broker_is_down_is_kept_and_planned_by_beat_later(oncall_client, checkpoint, broker_down, settings):
    from datetime import timedelta

    from django.utils import timezone

    from workers import tasks

    response = oncall_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "purge", "keep_batches": "3"}, follow=True
    )

    run = MaintenanceRun.objects.get()
    assert response.status_code == 200 and run.status == MaintenanceRun.Status.PLANNING
    assert "the task broker did not answer" in response.content.decode()
    # celery beat's resume task, a lease later, plans what the lost message would have.
    MaintenanceRun.objects.filter(pk=run.pk).update(requested_at=timezone.now() - timedelta(seconds=settings.MAINTENANCE_LEASE_SECONDS + 1))
    assert maintenance_runs.unplanned_run_ids() == [run.pk]
    from ckptweb.celery import app

    app.conf.task_always_eager = True
    try:
        tasks.resume_interrupted_maintenance()
    finally:
        app.conf.task_always_eager = False
    run.refresh_from_db()
    assert run.status == MaintenanceRun.Status.PLANNED
    assert maintenance_runs.unplanned_run_ids() == []
