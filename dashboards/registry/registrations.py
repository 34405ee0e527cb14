"""Registering, editing, archiving, restoring and removing a checkpoint, each with its audit entry.

The views and ``manage.py register_checkpoint`` both come through here, so every way in leaves
the same trail. Archiving keeps every row (batches, progress, syncs, findings): the checkpoint is
only left out of syncs, the list and /metrics, and its periodic tasks are disabled until restored.
Removing deletes the checkpoint and its rows; its audit entries keep its name.
"""

from __future__ import annotations

from datetime import datetime

from django.db import transaction

from dashboards.models import AuditEntry, Checkpoint
from dashboards.registry.forms import CheckpointForm
from dashboards.schedules import schedule_policy, schedule_sync

# Fields whose old and new values an "edited" entry records.
AUDITED_FIELDS = ("name", "url", "sink_log_url", "file_log_compact_interval", "is_enabled", "sync_interval_seconds")


class RegistryRefused(Exception):
    """The change cannot be made in the checkpoint's present state (archiving an archived one)."""


def save_registration(form: CheckpointForm, *, actor=None, actor_name: str = "") -> Checkpoint:
    """Save a valid form and audit it: "registered" for a new checkpoint, "edited" with what changed."""
    is_new = form.instance.pk is None
    changes = _audited_changes(form)
    with transaction.atomic():
        checkpoint = form.save()
        if is_new:
            _audit_registered(form, checkpoint, actor=actor, actor_name=actor_name)
        elif changes:
            AuditEntry.record(
                AuditEntry.Event.EDITED,
                actor=actor,
                actor_name=actor_name,
                checkpoint=checkpoint,
                detail="changed " + ", ".join(changes),
                data=changes,
            )
    return checkpoint


def _audited_changes(form: CheckpointForm) -> dict[str, list]:
    """The audited fields the form changes: field -> [old, new], as JSON values."""
    before_after = {
        field: [_json_value(form.initial.get(field)), _json_value(form.cleaned_data[field])]
        for field in form.changed_data
    }
    # A field Django counts as changed may hold the same value (a blank interval cleaned to its default).
    return {
        field: values for field, values in before_after.items() if field in AUDITED_FIELDS and values[0] != values[1]
    }


def _audit_registered(form: CheckpointForm, checkpoint: Checkpoint, *, actor, actor_name: str) -> None:
    """The "registered" entry: the URL and the form's warnings, and every audited field's value."""
    AuditEntry.record(
        AuditEntry.Event.REGISTERED,
        actor=actor,
        actor_name=actor_name,
        checkpoint=checkpoint,
        detail="; ".join([checkpoint.url, *form.warnings]),
        data={field: _json_value(form.cleaned_data[field]) for field in AUDITED_FIELDS},
    )


def audit_refusal(form: CheckpointForm, *, actor=None, actor_name: str = "") -> None:
    """Record a refused registration or edit with its reasons, as accepted ones are recorded.

    Call it with a bound form that failed validation; the entry keeps what was asked for, since a
    refused registration has no checkpoint row to point to.
    """
    editing = form.instance.pk is not None
    asked = {field: str(form.data.get(field, "")) for field in ("name", "url", "sink_log_url")}
    AuditEntry.record(
        AuditEntry.Event.EDIT_REFUSED if editing else AuditEntry.Event.REGISTRATION_REFUSED,
        actor=actor,
        actor_name=actor_name,
        checkpoint=form.instance if editing else None,
        checkpoint_name=form.initial["name"] if editing else asked["name"],
        detail=refusal_reasons(form),
        data={**asked, "reasons": {field: list(errors) for field, errors in form.errors.items()}},
    )


def refusal_reasons(form: CheckpointForm) -> str:
    """The form's errors in one line, each after the field it is about: "url: ... no such file"."""
    return "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())


def archive_checkpoint(checkpoint: Checkpoint, *, actor, reason: str, now: datetime) -> None:
    """Archive: no more syncs, scheduled maintenance or listing; every row is kept.

    A conditional UPDATE, so two people archiving at once leave one entry; RegistryRefused when
    it is archived already.
    """
    _set_archived_at(checkpoint, now, actor=actor, reason=reason, event=AuditEntry.Event.ARCHIVED)


def restore_checkpoint(checkpoint: Checkpoint, *, actor, reason: str = "") -> None:
    """Undo archive_checkpoint: its periodic sync and maintenance policies run again."""
    _set_archived_at(checkpoint, None, actor=actor, reason=reason, event=AuditEntry.Event.RESTORED)


def remove_checkpoint(checkpoint: Checkpoint, *, actor, reason: str) -> None:
    """Delete the checkpoint with every row about it; the audit entry keeps its name and URL."""
    with transaction.atomic():
        AuditEntry.record(
            AuditEntry.Event.REMOVED,
            actor=actor,
            checkpoint=checkpoint,
            detail=reason,
            data={"url": checkpoint.url, "batches": checkpoint.batches.count(), "was_archived": checkpoint.is_archived},
        )
        checkpoint.delete()


def _set_archived_at(checkpoint: Checkpoint, value: datetime | None, *, actor, reason: str, event: str) -> None:
    with transaction.atomic():
        updated = Checkpoint.objects.filter(pk=checkpoint.pk, archived_at__isnull=value is not None).update(
            archived_at=value
        )
        if updated != 1:
            raise RegistryRefused(
                f"{checkpoint.name} is {'archived already' if value is not None else 'not archived'}."
            )
        checkpoint.archived_at = value
        schedule_sync(checkpoint)
        for policy in checkpoint.maintenance_policies.all():
            policy.checkpoint = checkpoint  # the archived_at just set, not a fresh read
            schedule_policy(policy)
        AuditEntry.record(event, actor=actor, checkpoint=checkpoint, detail=reason)


def _json_value(value):
    """A form value as the audit entry's JSON stores it."""
    return value if value is None or isinstance(value, (bool, int, str)) else str(value)
