"""Rewind, skip, repair and undo on the web side: their own permissions, the approval they need by
default, the backup named after the run, the undo offered on a succeeded run, and the request form."""

from __future__ import annotations

import html
import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from dashboards.models import AuditEntry, MaintenancePolicy, MaintenanceRun
from factories import make_checkpoint, make_idle
from fixture_paths import OUR_FIXTURES
from workers import maintenance_runs

pytestmark = pytest.mark.django_db

# The fixture's committed batches are 8–11; a rewind to 9 removes 10 and 11.
REWIND_TO = 9


@pytest.fixture
def checkpoint(copy_checkpoint):
    directory = copy_checkpoint(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint", "orders")
    make_idle(directory)
    return make_checkpoint(url=str(directory))


def _user(django_user_model, name, oncall_group, *codenames):
    user = django_user_model.objects.create_user(name, password=f"{name}-password")
    user.groups.add(oncall_group)
    user.user_permissions.add(*Permission.objects.filter(content_type__app_label="dashboards", codename__in=codenames))
    return user


@pytest.fixture
def rewinder(django_user_model, oncall_group):
    return _user(django_user_model, "rita", oncall_group, "rewind_checkpoint", "undo_maintenance")


@pytest.fixture
def second_rewinder(django_user_model, oncall_group):
    return _user(django_user_model, "sam", oncall_group, "rewind_checkpoint", "undo_maintenance")


def _client_of(user) -> Client:
    """A client of its own (the ``client`` fixture is the one ``oncall_client`` signs in)."""
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def planned_rewind(checkpoint, rewinder, django_capture_on_commit_callbacks):
    client = _client_of(rewinder)
    with django_capture_on_commit_callbacks(execute=False):
        client.post(
            reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "rewind", "to_batch": REWIND_TO}
        )
    run = MaintenanceRun.objects.get(action="rewind")
    return maintenance_runs.make_plan(run.pk)


def _url(name, run):
    return reverse(f"dashboards:{name}", args=[run.checkpoint_id, run.pk])


def _confirm(client, run):
    return client.post(_url("maintenance-confirm", run), {"reason": "bad deploy after 9", "checkpoint_name": "orders"})


def test_a_rewind_request_stores_the_backup_folder_named_after_its_run(
    oncall_client, checkpoint, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False):
        response = oncall_client.post(
            reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "rewind", "to_batch": "9"}
        )

    run = MaintenanceRun.objects.get()
    assert response.status_code == 302
    assert run.parameters == {"to_batch": 9, "backup_dir": f"_ckptweb_backup/run-{run.pk}"}
    assert AuditEntry.objects.get(run=run).data == run.parameters


def test_an_undo_cannot_be_asked_for_from_the_request_form(oncall_client, checkpoint):
    response = oncall_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "undo", "backup_dir": "x"}
    )

    assert response.status_code == 400
    assert not MaintenanceRun.objects.exists()


@pytest.mark.parametrize(
    ("values", "parameters"),
    [
        ({"batch": "6"}, {"batch": 6}),
        (
            {"source": "0", "partition": "events-3", "to_offset": "120"},
            {"source": 0, "partition": "events-3", "to_offset": 120},
        ),
        ({"source": "1", "files": "a.json\n\n b.json "}, {"source": 1, "files": ["a.json", "b.json"]}),
    ],
)
def test_each_skip_shape_is_stored_as_the_planner_takes_it(
    oncall_client, checkpoint, django_capture_on_commit_callbacks, values, parameters
):
    with django_capture_on_commit_callbacks(execute=False):
        oncall_client.post(
            reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "skip", **values}
        )

    run = MaintenanceRun.objects.get()
    assert run.parameters == {**parameters, "backup_dir": f"_ckptweb_backup/run-{run.pk}"}


@pytest.mark.parametrize("values", [{}, {"batch": "6", "source": "0"}, {"source": "0", "partition": "events-3"}])
def test_a_skip_that_names_no_shape_or_two_is_refused(oncall_client, checkpoint, values):
    response = oncall_client.post(
        reverse("dashboards:maintenance-request", args=[checkpoint.pk]), {"action": "skip", **values}
    )

    assert response.status_code == 400
    assert not MaintenanceRun.objects.exists()


def test_a_finding_link_opens_the_form_with_the_repair_and_its_damage_chosen(oncall_client, checkpoint):
    page = oncall_client.get(
        reverse("dashboards:maintenance", args=[checkpoint.pk]), {"action": "repair", "damage": "offsets-gap"}
    ).content.decode()

    assert 'value="repair" id="action-repair" checked' in page
    assert 'name="damage" value="offsets-gap"' in page


def test_on_call_alone_may_read_a_rewind_plan_but_not_confirm_it(oncall_client, planned_rewind):
    page = oncall_client.get(_url("maintenance-run", planned_rewind)).content.decode()
    response = _confirm(oncall_client, planned_rewind)

    assert 'id="needs-action-permission"' in page and 'id="maintenance-confirm"' not in page
    assert response.status_code == 403
    assert MaintenanceRun.objects.get(pk=planned_rewind.pk).status == MaintenanceRun.Status.PLANNED


def test_the_rewind_plan_page_shows_its_notes_first_and_every_file_unfolded(rewinder, planned_rewind):
    client = _client_of(rewinder)
    plan = planned_rewind.maintenance_plan
    page = client.get(_url("maintenance-run", planned_rewind)).content.decode()

    assert plan.deletes and plan.notes
    warnings = page[page.index('id="plan-warnings"') : page.index("</div>", page.index('id="plan-warnings"'))]
    for note in plan.notes:
        assert note.split("\n")[0][:60] in warnings
    for delete in plan.deletes:
        assert f'<td class="mono">{delete.path}</td>' in page
    assert "<details open><summary>Files to delete" in page
    assert f"_ckptweb_backup/run-{planned_rewind.pk}" in page


def test_the_rewind_plan_page_lists_each_precondition_once_with_every_judgement_of_query_stopped(
    rewinder, planned_rewind
):
    page = _client_of(rewinder).get(_url("maintenance-run", planned_rewind)).content.decode()

    names = re.findall(r"<strong>[✔✘] ([\w-]+)</strong>", page)
    assert names and len(names) == len(set(names)), names
    stopped = re.search(r"<strong>✔ query-stopped</strong>: (.*?)</li>", page).group(1)
    assert "no batch written for" in stopped  # the files' dates
    assert "no progress received" in stopped  # the listener's progress
    assert "no sync in the last" in stopped  # the syncs


def test_the_rewind_plan_page_keeps_the_storage_clock_with_the_preconditions_out_of_the_warning_box(
    rewinder, planned_rewind
):
    page = _client_of(rewinder).get(_url("maintenance-run", planned_rewind)).content.decode()

    start = page.index('id="plan-warnings"')
    assert "clock" not in page[start : page.index("</div>", start)]
    clock = html.unescape(re.search(r"<strong>✔ storage-clock</strong>: (.*?)</li>", page).group(1))
    where = Path(planned_rewind.checkpoint.url).as_uri()
    assert clock.startswith(f"the clock of {where} agrees with this worker's"), clock


def test_a_confirmed_rewind_waits_for_a_second_person_with_the_rewind_permission(
    rewinder, second_rewinder, oncall_client, planned_rewind, monkeypatch, django_capture_on_commit_callbacks
):
    from workers import tasks

    queued = []
    monkeypatch.setattr(tasks.run_maintenance, "apply_async", lambda args: queued.extend(args))
    client = _client_of(rewinder)
    assert _confirm(client, planned_rewind).status_code == 302
    assert MaintenanceRun.objects.get(pk=planned_rewind.pk).status == MaintenanceRun.Status.AWAITING_APPROVAL

    # On-call may approve a purge, not a rewind; the one who confirmed may not approve at all.
    assert oncall_client.post(_url("maintenance-approve", planned_rewind)).status_code == 403
    client.post(_url("maintenance-approve", planned_rewind))
    assert MaintenanceRun.objects.get(pk=planned_rewind.pk).status == MaintenanceRun.Status.AWAITING_APPROVAL

    with django_capture_on_commit_callbacks(execute=True):
        _client_of(second_rewinder).post(_url("maintenance-approve", planned_rewind))
    run = MaintenanceRun.objects.get(pk=planned_rewind.pk)
    assert run.status == MaintenanceRun.Status.QUEUED and run.approved_by == second_rewinder
    assert queued == [run.pk]


def test_with_the_setting_off_a_confirmed_rewind_is_queued_at_once(rewinder, planned_rewind, settings):
    settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL = False

    _confirm(_client_of(rewinder), planned_rewind)

    assert MaintenanceRun.objects.get(pk=planned_rewind.pk).status == MaintenanceRun.Status.QUEUED


def test_a_purge_still_needs_no_approval_by_default(checkpoint):
    run = MaintenanceRun.objects.create(checkpoint=checkpoint, action="purge", parameters={"keep_batches": 2})

    assert not run.needs_approval()


def test_a_policy_cannot_schedule_a_rewind(checkpoint):
    policy = MaintenancePolicy(checkpoint=checkpoint, action="rewind", parameters={"to_batch": 9}, reason="never")

    with pytest.raises(Exception, match="rewind"):
        policy.full_clean()


def _run_to_success(run, *, approver):
    run.confirm(run.requested_by, reason="bad deploy after 9", override_query_running=False, now=timezone.now())
    run.approve(approver, now=timezone.now())
    return maintenance_runs.execute_run(run.pk, owner="test-worker")


def test_a_succeeded_rewind_offers_its_undo_which_restores_from_its_backup(
    rewinder, second_rewinder, planned_rewind, checkpoint, django_capture_on_commit_callbacks
):
    run = _run_to_success(planned_rewind, approver=second_rewinder)
    assert run.status == MaintenanceRun.Status.SUCCEEDED, run.error
    client = _client_of(rewinder)

    page = client.get(_url("maintenance-run", run)).content.decode()
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(_url("maintenance-undo", run))

    assert 'id="undo-run"' in page
    undo = MaintenanceRun.objects.get(action="undo")
    assert response["Location"] == undo.get_absolute_url()
    assert undo.parameters == {"backup_dir": f"_ckptweb_backup/run-{run.pk}"}
    assert "undo of run" in AuditEntry.objects.get(run=undo).detail
    # Asked for once: the page of the undone run links to the undo instead of offering it again.
    page = client.get(_url("maintenance-run", run)).content.decode()
    assert 'id="undo-run"' not in page and f"run #{undo.pk}" in page
    assert client.post(_url("maintenance-undo", run)).status_code == 302
    assert MaintenanceRun.objects.filter(action="undo").count() == 1


def test_after_its_backup_is_pruned_the_run_page_says_when_instead_of_showing_the_folder_as_there(
    rewinder, second_rewinder, planned_rewind, settings
):
    from workers.backup_retention import prune_expired_backups

    run = _run_to_success(planned_rewind, approver=second_rewinder)
    backup = f"_ckptweb_backup/run-{run.pk}"
    later = run.finished_at + timedelta(days=settings.MAINTENANCE_BACKUP_RETENTION_DAYS, hours=1)
    assert prune_expired_backups(later)["runs"] == 1
    run.refresh_from_db()

    page = _client_of(rewinder).get(_url("maintenance-run", run)).content.decode()

    shown = re.search(r'<dd id="run-backup">(.*?)</dd>', page, re.S).group(1)
    assert shown.startswith(f"pruned on {later:%Y-%m-%d %H:%M} UTC, after the retention period")
    assert shown.endswith(f'it was <span class="mono">{backup}</span>')


def test_a_purge_offers_no_undo(oncall_client, checkpoint):
    run = MaintenanceRun.objects.create(
        checkpoint=checkpoint, action="purge", parameters={"keep_batches": 2}, status="succeeded"
    )

    assert 'id="undo-run"' not in oncall_client.get(_url("maintenance-run", run)).content.decode()
    assert run.why_not_undoable() == "only a rewind, a skip or a repair keeps a backup to undo from"


def test_a_finding_a_repair_fixes_links_to_the_repair_form_and_others_do_not(viewer_client, checkpoint):
    from workers.sync import sync_checkpoint

    with open(f"{checkpoint.url}/offsets/11", "w"):
        pass  # the latest offsets file left empty by a crash: Spark refuses it at restart
    sync_checkpoint(checkpoint.pk)

    page = viewer_client.get(reverse("dashboards:checkpoint-detail", args=[checkpoint.pk])).content.decode()

    findings = {finding.code: finding for finding in checkpoint.findings.open()}
    assert findings["log-file-empty"].path == "offsets/11" and findings["log-file-empty"].is_repairable
    table = page[page.index('id="findings"') :]
    row = table[table.index("offsets/11</td>") :]
    row = row[: row.index("</tr>")]
    assert f'href="/checkpoints/{checkpoint.pk}/maintenance/?action=repair&amp;damage=log-file-empty' in row
    not_repairable = [f for f in findings.values() if not f.is_repairable]
    assert page.count('class="repair-link"') == len(findings) - len(not_repairable)
