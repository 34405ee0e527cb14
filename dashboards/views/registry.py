"""Registering, editing, archiving, restoring and removing checkpoints: permission, form, audited call.

The audited work is in dashboards.registry.registrations; these views fetch, validate and redirect.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required, permission_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from dashboards.models import Checkpoint
from dashboards.queueing import PERIODIC_SYNC, enqueue_on_commit
from dashboards.registry.forms import ArchiveForm, CheckpointForm, RemoveForm
from dashboards.registry.registrations import (
    RegistryRefused,
    archive_checkpoint,
    audit_refusal,
    remove_checkpoint,
    restore_checkpoint,
    save_registration,
)
from dashboards.task_names import SYNC_CHECKPOINT
from dashboards.views.pages import CHECKPOINTS_PER_PAGE, get_checkpoint_for_user


@login_required
@permission_required("dashboards.add_checkpoint", raise_exception=True)
def checkpoint_create(request: HttpRequest) -> HttpResponse:
    form = CheckpointForm(request.POST or None)
    if _is_accepted(request, form):
        checkpoint = save_registration(form, actor=request.user)
        enqueue_on_commit(request, SYNC_CHECKPOINT, checkpoint.pk, what="The checkpoint", afterwards=PERIODIC_SYNC)
        messages.success(request, f"Registered {checkpoint.name}; the first sync is queued.")
        _tell_warnings(request, form)
        return redirect(checkpoint)
    return render(request, "dashboards/checkpoint_form.html", {"form": form})


@login_required
@permission_required("dashboards.change_checkpoint", raise_exception=True)
def checkpoint_edit(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    form = CheckpointForm(request.POST or None, instance=checkpoint)
    if _is_accepted(request, form):
        save_registration(form, actor=request.user)
        messages.success(request, f"Saved {checkpoint.name}.")
        _tell_warnings(request, form)
        return redirect(checkpoint)
    return render(request, "dashboards/checkpoint_form.html", {"form": form, "checkpoint": checkpoint})


@login_required
@permission_required("dashboards.change_checkpoint", raise_exception=True)
def checkpoint_archive(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    """GET: what archiving does, and the form; POST: archive."""
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    form = ArchiveForm(_posted(request))
    if request.method == "POST" and form.is_valid():
        _archive_saying_how_it_went(request, checkpoint, form.cleaned_data["reason"])
        return redirect(checkpoint)
    return render(request, "dashboards/checkpoint_archive.html", {"checkpoint": checkpoint, "form": form})


def _archive_saying_how_it_went(request: HttpRequest, checkpoint, reason: str) -> None:
    """Archive the checkpoint; a message says it was archived, or why it was not."""
    try:
        archive_checkpoint(checkpoint, actor=request.user, reason=reason, now=timezone.now())
    except RegistryRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Archived {checkpoint.name}: no longer synced or listed; its history is kept.")


@login_required
@permission_required("dashboards.change_checkpoint", raise_exception=True)
@require_POST
def checkpoint_restore(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    form = ArchiveForm(request.POST)
    reason = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        restore_checkpoint(checkpoint, actor=request.user, reason=reason)
    except RegistryRefused as exc:
        messages.error(request, str(exc))
    else:
        enqueue_on_commit(request, SYNC_CHECKPOINT, checkpoint.pk, what="The checkpoint", afterwards=PERIODIC_SYNC)
        messages.success(request, f"Restored {checkpoint.name}; a sync is queued.")
    return redirect(checkpoint)


@login_required
@permission_required("dashboards.delete_checkpoint", raise_exception=True)
def checkpoint_remove(request: HttpRequest, checkpoint_id: int) -> HttpResponse:
    """GET: what removing deletes, and the form (reason, name typed out); POST: remove."""
    checkpoint = get_checkpoint_for_user(request, checkpoint_id)
    form = RemoveForm(_posted(request), checkpoint=checkpoint)
    if request.method == "POST" and form.is_valid():
        name = checkpoint.name
        remove_checkpoint(checkpoint, actor=request.user, reason=form.cleaned_data["reason"])
        messages.success(request, f"Removed {name} and its history; the audit trail keeps the record.")
        return redirect("dashboards:checkpoint-list")
    context = {"checkpoint": checkpoint, "form": form, "batch_count": checkpoint.batches.count()}
    return render(request, "dashboards/checkpoint_remove.html", context)


@login_required
def archived_checkpoint_list(request: HttpRequest) -> HttpResponse:
    page = Paginator(Checkpoint.objects.archived(), CHECKPOINTS_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "dashboards/archived_checkpoint_list.html", {"page_obj": page})


def _is_accepted(request: HttpRequest, form: CheckpointForm) -> bool:
    """Tell whether a registration or edit was posted and is valid; audit it when it is refused."""
    if request.method != "POST":
        return False
    if not form.is_valid():
        audit_refusal(form, actor=request.user)
        return False
    return True


def _tell_warnings(request: HttpRequest, form: CheckpointForm) -> None:
    for warning in form.warnings:
        messages.warning(request, warning)


def _posted(request: HttpRequest):
    """The POST data to bind a form to, even when empty (an optional reason left blank), else None."""
    return request.POST if request.method == "POST" else None
