"""Maintenance pages: request a plan, read it, confirm it, approve it, follow the run, read the audit trail.

Viewing needs a login; asking for a plan needs ``plan_maintenance``; confirming and running need
``run_maintenance``; approving needs ``approve_maintenance`` (the "on-call" group has all three).
The risky actions (rewind, skip, repair, undo) need their own permission as well to be confirmed
or approved (``may_run_action``), and keep a backup of every file they change, so that a
succeeded run can be undone from its page. The views change rows and enqueue tasks; the workers
touch storage.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboards.maintenance_page.forms import ACTION_FORMS, MaintenanceConfirmForm, MaintenanceRequest
from dashboards.models import (
    AuditEntry,
    Checkpoint,
    MaintenanceAction,
    MaintenanceRefused,
    MaintenanceRun,
    backup_dir_of_run,
    may_run_action,
)
from dashboards.queueing import enqueue_on_commit
from dashboards.task_names import PLAN_MAINTENANCE, RUN_MAINTENANCE

AUDIT_ENTRIES_PER_PAGE = 50
RECENT_RUNS = 20


def _get_run(checkpoint_id: int, run_id: int) -> MaintenanceRun:
    return get_object_or_404(
        MaintenanceRun.objects.select_related("checkpoint", "requested_by", "confirmed_by", "approved_by", "policy"),
        pk=run_id,
        checkpoint_id=checkpoint_id,
    )


def _overview_context(checkpoint: Checkpoint, request_form: MaintenanceRequest) -> dict:
    return {
        "checkpoint": checkpoint,
        "request_form": request_form,
        "runs": checkpoint.maintenance_runs.for_page()[:RECENT_RUNS],
        "policies": checkpoint.maintenance_policies.order_by("action"),
    }


def _request_form(checkpoint: Checkpoint, data=None) -> MaintenanceRequest:
    return MaintenanceRequest(data, checkpoint=checkpoint, figures=Checkpoint.objects.maintenance_figures(checkpoint))


@login_required
def maintenance_overview(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    """The request form; ``?action=repair&damage=CODE`` (a finding's link) starts it with that action chosen."""
    checkpoint = get_object_or_404(Checkpoint, pk=checkpoint_id)
    chosen = request.GET if request.GET.get("action") in ACTION_FORMS else None
    return render(
        request, "dashboards/maintenance.html", _overview_context(checkpoint, _request_form(checkpoint, chosen))
    )


@login_required
def maintenance_preview_panel(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    """One action's preview line for the values in the query string (htmx swaps it in as they change)."""
    checkpoint = get_object_or_404(Checkpoint, pk=checkpoint_id)
    action = request.GET.get("action")
    if action not in ACTION_FORMS:
        raise Http404("no such maintenance action")
    context = {"checkpoint": checkpoint, "choice": _request_form(checkpoint, request.GET).choice(action)}
    return render(request, "dashboards/partials/maintenance_preview.html", context)


@login_required
@require_POST
@permission_required("dashboards.plan_maintenance", raise_exception=True)
def maintenance_request(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_object_or_404(Checkpoint, pk=checkpoint_id)
    request_form = _request_form(checkpoint, request.POST)
    if not request_form.is_valid():
        return render(request, "dashboards/maintenance.html", _overview_context(checkpoint, request_form), status=400)
    run = _request_run(request, checkpoint, request_form.action, request_form.parameters())
    return redirect(run)


def _request_run(request: HttpRequest, checkpoint: Checkpoint, action: str, parameters: dict, detail: str = ""):
    """Store a requested run (a risky action's with the backup directory named after it) and queue its plan."""
    with transaction.atomic():
        run = MaintenanceRun.objects.create(
            checkpoint=checkpoint, action=action, parameters=parameters, requested_by=request.user
        )
        if action in MaintenanceAction.risky() and "backup_dir" not in parameters:
            run.parameters = {**parameters, "backup_dir": backup_dir_of_run(run.pk)}
            run.save(update_fields=["parameters"])
        AuditEntry.record(
            AuditEntry.Event.PLAN_REQUESTED, actor=request.user, run=run, detail=detail, data=run.parameters
        )
        enqueue_on_commit(request, PLAN_MAINTENANCE, run.pk, what="The request")
    return run


@login_required
@require_POST
@permission_required("dashboards.plan_maintenance", raise_exception=True)
def maintenance_undo(request: HttpRequest, checkpoint_id: int, run_id: int) -> HttpResponse:
    """Ask for the plan of undoing a succeeded risky run from its backup; the undo is a run of its own."""
    run = _get_run(checkpoint_id, run_id)
    if not run.can_be_undone():
        messages.error(request, f"Run #{run.pk} cannot be undone: {run.why_not_undoable()}")
        return redirect(run)
    undo = _request_run(
        request,
        run.checkpoint,
        MaintenanceAction.UNDO,
        {"backup_dir": run.backup_dir},
        detail=f"undo of run #{run.pk} ({run.get_action_display()})",
    )
    return redirect(undo)


@login_required
def maintenance_run(request: HttpRequest, checkpoint_id: int, run_id: int) -> HttpResponse:
    run = _get_run(checkpoint_id, run_id)
    return render(request, "dashboards/maintenance_run.html", _run_context(request, run))


@login_required
def maintenance_run_panel(request: HttpRequest, checkpoint_id: int, run_id: int) -> HttpResponse:
    """The part of the run page that changes (status, plan, progress, result), polled by htmx.

    When the status differs from the one the page was rendered with, the forms around the panel
    (confirm, approve, cancel) change too, so htmx is told to reload the whole page.
    """
    run = _get_run(checkpoint_id, run_id)
    response = render(request, "dashboards/partials/maintenance_run.html", _run_context(request, run))
    if request.GET.get("shown", run.status) != run.status:
        response["HX-Refresh"] = "true"
    return response


def _run_context(request: HttpRequest, run: MaintenanceRun, confirm_form: MaintenanceConfirmForm | None = None) -> dict:
    plan = run.maintenance_plan
    now = timezone.now()
    failed = plan.failed_preconditions() if plan is not None else ()
    return {
        "checkpoint": run.checkpoint,
        "run": run,
        "plan": plan,
        "plan_is_stale": run.plan_is_stale(now=now),
        "query_looks_running": any(p.name == "query-stopped" for p in failed),
        "confirm_form": confirm_form or MaintenanceConfirmForm(checkpoint=run.checkpoint),
        "is_risky": run.action in MaintenanceAction.risky(),
        **_run_permissions(request, run),
        "backup_retention_days": settings.MAINTENANCE_BACKUP_RETENTION_DAYS,
        "undone_by": run.undo_runs().first(),
        "audit_entries": run.audit_entries.order_by("at", "pk"),
    }


def _run_permissions(request: HttpRequest, run: MaintenanceRun) -> dict[str, bool]:
    """What the user may do with the run in its present status: confirm, approve, undo."""
    return {
        "may_confirm": may_run_action(request.user, run.action),
        "can_confirm": may_run_action(request.user, run.action) and run.status in run.CONFIRMABLE_STATUSES,
        "can_approve": (
            may_run_action(request.user, run.action, step="approve_maintenance")
            and run.status == run.Status.AWAITING_APPROVAL
            and run.confirmed_by_id != request.user.pk
        ),
        "can_undo": request.user.has_perm("dashboards.plan_maintenance") and run.can_be_undone(),
    }


@login_required
@require_POST
@permission_required("dashboards.run_maintenance", raise_exception=True)
def maintenance_confirm(request: HttpRequest, checkpoint_id: int, run_id: int) -> HttpResponse:
    """Confirm a plan; a refused confirmation is audited and the page comes back with what was typed."""
    run = _get_run(checkpoint_id, run_id)
    _check_action_permission(request, run, step="run_maintenance")
    form = MaintenanceConfirmForm(request.POST, checkpoint=run.checkpoint)
    if not form.is_valid():
        return _refused_confirmation(request, run, form, form.refusal(), status=400)
    try:
        _confirm_and_queue(request, run, form)
    except MaintenanceRefused as exc:
        # confirm() may have changed the instance before it was refused: show the run as stored.
        return _refused_confirmation(request, _get_run(checkpoint_id, run_id), form, str(exc), status=409)
    return redirect(run)


@transaction.atomic
def _confirm_and_queue(request: HttpRequest, run: MaintenanceRun, form: MaintenanceConfirmForm) -> None:
    """Confirm as the user; a run that needs no approval is queued once the transaction commits."""
    run.confirm(
        request.user,
        reason=form.cleaned_data["reason"],
        override_query_running=form.cleaned_data["override_query_running"],
        now=timezone.now(),
    )
    if run.status == run.Status.QUEUED:
        enqueue_on_commit(request, RUN_MAINTENANCE, run.pk, what="The confirmation")


def _check_action_permission(request: HttpRequest, run: MaintenanceRun, *, step: str) -> None:
    """403 when the user lacks the risky action's own permission (the step's is checked by the decorator)."""
    if not may_run_action(request.user, run.action, step=step):
        raise PermissionDenied(f"{run.get_action_display()} needs its own permission as well as {step}")


def _refused_confirmation(
    request: HttpRequest, run: MaintenanceRun, form: MaintenanceConfirmForm, why: str, *, status: int
) -> HttpResponse:
    """Audit a refused confirmation and show the run page again, with what was typed and why it was refused."""
    run.record_refused_confirmation(request.user, why=why, typed=form.typed())
    form.add_error(None, f"Not confirmed: {why}")
    return render(request, "dashboards/maintenance_run.html", _run_context(request, run, form), status=status)


@login_required
@require_POST
@permission_required("dashboards.approve_maintenance", raise_exception=True)
def maintenance_approve(request: HttpRequest, checkpoint_id: int, run_id: int) -> HttpResponse:
    run = _get_run(checkpoint_id, run_id)
    _check_action_permission(request, run, step="approve_maintenance")
    try:
        with transaction.atomic():
            run.approve(request.user, now=timezone.now())
            enqueue_on_commit(request, RUN_MAINTENANCE, run.pk, what="The approval")
    except MaintenanceRefused as exc:
        messages.error(request, f"Not approved: {exc}")
    return redirect(run)


@login_required
@require_POST
@permission_required("dashboards.plan_maintenance", raise_exception=True)
def maintenance_cancel(request: HttpRequest, checkpoint_id: int, run_id: int) -> HttpResponse:
    run = _get_run(checkpoint_id, run_id)
    try:
        run.cancel(request.user, reason=request.POST.get("reason", ""))
    except MaintenanceRefused as exc:
        messages.error(request, str(exc))
    return redirect(run)


@login_required
def audit_log(request: HttpRequest) -> HttpResponse:
    """Every audit entry, newest first; optionally one checkpoint's. Read-only by design."""
    entries = AuditEntry.objects.recent()
    checkpoint_id = request.GET.get("checkpoint", "")
    if checkpoint_id.isdigit():
        entries = entries.filter(checkpoint_id=int(checkpoint_id))
    page = Paginator(entries, AUDIT_ENTRIES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "dashboards/audit_log.html", {"page": page, "checkpoint_id": checkpoint_id})
