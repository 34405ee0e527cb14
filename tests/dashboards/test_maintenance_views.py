"""Maintenance pages: who may do what, the two-step confirmation, what the pages show."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse
from django.utils.html import escape

from dashboards.models import AuditEntry, Batch, MaintenanceRun
from factories import long_stateless_history, make_checkpoint
from fixture_paths import OUR_FIXTURES
from workers import maintenance_runs
from workers.sync import sync_checkpoint

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


def test_asking_for_a_plan_creates_a_run_and_queues_the_planner(
    oncall_client, checkpoint, django_capture_on_commit_callbacks, eager_celery
):
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
    response = oncall_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "purge", "keep_batches": ""}
    )

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
    response = viewer_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "purge", "keep_batches": "3"}
    )
    assert response.status_code == 403


def test_the_run_page_shows_every_file_of_the_plan_and_its_preconditions(oncall_client, planned_run):
    page = oncall_client.get(_url("maintenance-run", planned_run)).content.decode()

    for delete in planned_run.maintenance_plan.deletes:
        assert f'<td class="mono">{delete.path}</td>' in page
    for precondition in planned_run.maintenance_plan.preconditions:
        assert precondition.name in page
    assert "Confirm and run" in page


def test_confirming_needs_the_checkpoint_name_typed_exactly(
    oncall_client, planned_run, django_capture_on_commit_callbacks
):
    response = oncall_client.post(
        _url("maintenance-confirm", planned_run), {"reason": "disk full", "checkpoint_name": "order"}
    )

    assert response.status_code == 400
    assert "exactly to confirm" in response.content.decode()
    assert MaintenanceRun.objects.get(pk=planned_run.pk).status == MaintenanceRun.Status.PLANNED


def test_a_confirmed_run_is_queued_for_the_worker(
    oncall_client, planned_run, django_capture_on_commit_callbacks, monkeypatch
):
    from workers import tasks

    queued = []
    monkeypatch.setattr(tasks.run_maintenance, "apply_async", lambda args: queued.extend(args))
    with django_capture_on_commit_callbacks(execute=True):
        response = oncall_client.post(
            _url("maintenance-confirm", planned_run), {"reason": "disk full", "checkpoint_name": "orders"}
        )

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

    page = viewer_client.get(
        reverse("dashboards:audit-log") + f"?checkpoint={planned_run.checkpoint_id}"
    ).content.decode()

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
def test_a_request_made_while_the_broker_is_down_is_kept_and_planned_by_beat_later(
    oncall_client, checkpoint, broker_down, settings
):
    from datetime import timedelta

    from django.utils import timezone

    from workers import tasks

    response = oncall_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]),
        {"action": "purge", "keep_batches": "3"},
        follow=True,
    )

    run = MaintenanceRun.objects.get()
    assert response.status_code == 200 and run.status == MaintenanceRun.Status.PLANNING
    assert "the task broker did not answer" in response.content.decode()
    # celery beat's resume task, a lease later, plans what the lost message would have.
    MaintenanceRun.objects.filter(pk=run.pk).update(
        requested_at=timezone.now() - timedelta(seconds=settings.MAINTENANCE_LEASE_SECONDS + 1)
    )
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


# --- the request form: one action's parameters, defaults from the checkpoint, a preview ---


def _fieldset(page: str, action: str) -> str:
    start = page.index(f'<fieldset id="parameters-{action}">')
    return page[start : page.index("</fieldset>", start)]


def test_each_action_has_its_own_fieldset_with_only_its_parameters(oncall_client, checkpoint):
    page = oncall_client.get(reverse("dashboards:maintenance", args=[checkpoint.pk])).content.decode()

    expected = {
        "purge": {"keep_batches"},
        "snapshot": {"min_chain"},
        "cleanup": {"min_versions_to_retain", "keep_offsets_range"},
        "compact": {"log", "min_batches_to_retain"},
    }
    for action, names in expected.items():
        assert f'<input type="radio" name="action" value="{action}" id="action-{action}">' in page
        assert set(re.findall(r'name="(\w+)"', _fieldset(page, action))) == names, action


def test_the_defaults_come_from_the_minimum_the_offset_log_pins_and_the_preview_says_what_would_go(
    oncall_client, checkpoint
):
    sync_checkpoint(checkpoint.pk)  # 12 batches, 0..11
    Batch.objects.filter(checkpoint=checkpoint, batch_id=11).update(
        conf={"spark.sql.streaming.minBatchesToRetain": "4"}
    )

    page = oncall_client.get(reverse("dashboards:maintenance", args=[checkpoint.pk])).content.decode()

    purge = _fieldset(page, "purge")
    assert 'name="keep_batches" value="4"' in purge
    assert "Default 4: spark.sql.streaming.minBatchesToRetain, pinned in the offset log." in purge
    assert "purge offsets and commits of batches 0–7 (8 batches), keep batches 8–11 (4 batches)" in purge
    assert 'name="min_versions_to_retain" value="4"' in _fieldset(page, "cleanup")


def test_the_preview_panel_follows_the_values_typed(oncall_client, checkpoint):
    sync_checkpoint(checkpoint.pk)
    url = reverse("dashboards:maintenance-preview-panel", args=[checkpoint.pk])

    fewer = oncall_client.get(url, {"action": "purge", "keep_batches": "10"}).content.decode()
    too_many = oncall_client.get(url, {"action": "purge", "keep_batches": "50"}).content.decode()
    invalid = oncall_client.get(url, {"action": "purge", "keep_batches": "0"}).content.decode()

    assert "purge offsets and commits of batches 0–1 (2 batches), keep batches 2–11 (10 batches)" in fewer
    assert (
        "nothing to purge: keeping the last 50 batches keeps batches 0–11 (12 batches), all that is stored; "
        "keeping 11 or fewer"
    ) in too_many
    assert "Enter valid values to see what this would do." in invalid
    assert oncall_client.get(url, {"action": "explode"}).status_code == 404


def test_a_request_with_an_error_keeps_the_chosen_action_and_what_was_typed(oncall_client, checkpoint):
    response = oncall_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]),
        {"action": "cleanup", "min_versions_to_retain": "0"},
    )

    page = response.content.decode()
    assert response.status_code == 400
    assert '<input type="radio" name="action" value="cleanup" id="action-cleanup" checked>' in page
    assert 'name="min_versions_to_retain" value="0"' in _fieldset(page, "cleanup")
    assert "Ensure this value is greater than or equal to 1." in _fieldset(page, "cleanup")
    assert "errorlist" not in _fieldset(page, "purge")


def test_a_request_reads_only_the_chosen_actions_parameters(
    oncall_client, checkpoint, django_capture_on_commit_callbacks, monkeypatch
):
    from workers import tasks

    monkeypatch.setattr(tasks.plan_maintenance, "apply_async", lambda args: None)
    oncall_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]),
        {"action": "cleanup", "min_versions_to_retain": "7", "keep_batches": "2", "min_chain": "x"},
    )

    assert MaintenanceRun.objects.get().parameters == {"min_versions_to_retain": 7, "keep_offsets_range": False}


# --- a refused confirmation: what was typed stays, and the refusal is audited ---


def test_a_confirmation_with_a_wrong_name_keeps_the_typed_input_and_is_audited(oncall_client, planned_run):
    response = oncall_client.post(
        _url("maintenance-confirm", planned_run), {"reason": "disk almost full", "checkpoint_name": "order"}
    )

    page = response.content.decode()
    assert response.status_code == 400
    assert "\ndisk almost full</textarea>" in page and 'value="order"' in page
    refusal = planned_run.audit_entries.get(event=AuditEntry.Event.REFUSED)
    assert refusal.actor_name == "olga"
    assert (
        refusal.detail
        == "confirmation refused: Checkpoint name: Type 'orders' exactly to confirm. Reason typed: “disk almost full”."
    )
    assert refusal.data == {
        "typed": {"reason": "disk almost full", "checkpoint_name": "order", "override_query_running": ""}
    }
    assert escape(refusal.detail) in page  # the run page's audit table


def test_a_confirmation_refused_by_a_precondition_keeps_the_typed_input_and_is_audited(oncall_client, planned_run):
    other = MaintenanceRun.objects.create(
        checkpoint=planned_run.checkpoint, action="purge", status=MaintenanceRun.Status.QUEUED
    )

    response = oncall_client.post(
        _url("maintenance-confirm", planned_run), {"reason": "disk almost full", "checkpoint_name": "orders"}
    )

    page = response.content.decode()
    assert response.status_code == 409
    assert "Not confirmed: another maintenance run of this checkpoint is queued or running; wait for it" in page
    assert "\ndisk almost full</textarea>" in page and 'value="orders"' in page
    assert MaintenanceRun.objects.get(pk=planned_run.pk).status == MaintenanceRun.Status.PLANNED
    refusal = planned_run.audit_entries.get(event=AuditEntry.Event.REFUSED)
    assert refusal.detail == (
        "confirmation refused: another maintenance run of this checkpoint is queued or running; "
        "wait for it. Reason typed: “disk almost full”."
    )
    assert not planned_run.audit_entries.filter(event=AuditEntry.Event.CONFIRMED).exists()
    assert other.status == MaintenanceRun.Status.QUEUED
