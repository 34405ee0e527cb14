"""Maintenance of checkpoints: requested runs with their stored plans, scheduled policies, and the audit trail.

A run goes request -> plan (a worker stores what workers.checkpoint.maintenance planned) ->
confirmation with a reason (and, when configured, a second person's approval) -> queued ->
running (one at a time per checkpoint, under a lease a crashed worker loses) -> a result.
Every step writes an AuditEntry, which nothing in the UI can edit.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from dashboards.models.core import Checkpoint
from dashboards.schedules import schedule_policy, unschedule_policy
from workers.checkpoint.layout import BACKUP_DIR
from workers.checkpoint.maintenance.plan import plan_from_json


class MaintenanceRefused(Exception):
    """A maintenance step was refused; the message says why, for the page."""


class MaintenanceAction(models.TextChoices):
    PURGE = "purge", "Purge old offsets and commits"
    SNAPSHOT = "snapshot", "Write state snapshots"
    CLEANUP = "cleanup", "Clean up old state files"
    COMPACT = "compact", "Compact and expire metadata logs"
    REWIND = "rewind", "Rewind to a batch"
    SKIP = "skip", "Skip a batch or part of a source"
    REPAIR = "repair", "Repair what Spark refuses at restart"
    UNDO = "undo", "Undo a run from its backup"

    @classmethod
    def risky(cls) -> frozenset[str]:
        """The actions that change what the query computes next (or restore such a change): each
        needs its own permission, and a second person's approval unless the setting turns it off."""
        return frozenset({cls.REWIND, cls.SKIP, cls.REPAIR, cls.UNDO})

    @classmethod
    def scheduled(cls) -> list[tuple[str, str]]:
        """The actions a policy may run unattended: never the risky ones, which a person decides on."""
        return [(value, label) for value, label in cls.choices if value not in cls.risky()]


# Where the risky actions keep their backups, inside the checkpoint (the library's folder, never read by Spark).
BACKUP_ROOT = BACKUP_DIR
# The permission each risky action needs on top of run_maintenance (or approve_maintenance): the
# "on-call" group does not have them, an administrator grants them to the few who may.
ACTION_PERMISSIONS = {
    MaintenanceAction.REWIND: "rewind_checkpoint",
    MaintenanceAction.SKIP: "skip_batch",
    MaintenanceAction.REPAIR: "repair_checkpoint",
    MaintenanceAction.UNDO: "undo_maintenance",
}


def may_run_action(user, action: str, *, step: str = "run_maintenance") -> bool:
    """Whether ``user`` may confirm (``step="run_maintenance"``) or approve (``"approve_maintenance"``)
    a run of ``action``: the step's permission, and the action's own for a risky action."""
    needed = [f"dashboards.{step}"]
    if action in ACTION_PERMISSIONS:
        needed.append(f"dashboards.{ACTION_PERMISSIONS[action]}")
    return user.has_perms(needed)


def backup_dir_of_run(run_id: int) -> str:
    """Where a run's files are copied before they are deleted or overwritten, inside the checkpoint
    (Spark never reads it; the walker skips it)."""
    return f"{BACKUP_ROOT}/run-{run_id}"


class MaintenanceRunQuerySet(models.QuerySet):
    def with_backup_to_prune(self, *, ended_before: datetime) -> MaintenanceRunQuerySet:
        """Finished runs that kept a backup, ended before ``ended_before``, not pruned yet, and
        with no undo of them waiting or running (an undo reads the backup)."""
        undoing = self.filter(
            action=MaintenanceAction.UNDO, status__in=(*self.model.ACTIVE_STATUSES, *self.model.WAITING_STATUSES)
        ).values("parameters__backup_dir")
        return (
            self.filter(
                status__in=self.model.FINAL_STATUSES, finished_at__lt=ended_before, backup_pruned_at__isnull=True
            )
            .exclude(action=MaintenanceAction.UNDO)
            .filter(parameters__has_key="backup_dir")
            .exclude(parameters__backup_dir__in=undoing)
        )

    def claim_backup_pruning(self, pk: int, *, now: datetime) -> bool:
        """Mark the run's backup pruned unless another worker did; True when this caller may delete it."""
        return self.filter(pk=pk, backup_pruned_at__isnull=True).update(backup_pruned_at=now) == 1

    def active(self) -> MaintenanceRunQuerySet:
        """Runs that hold or wait for the checkpoint's single maintenance slot."""
        return self.filter(status__in=MaintenanceRun.ACTIVE_STATUSES)

    def for_page(self) -> MaintenanceRunQuerySet:
        related = self.select_related("checkpoint", "requested_by", "confirmed_by", "approved_by", "policy")
        return related.prefetch_related("audit_entries").order_by("-requested_at")

    def interrupted(self, *, now: datetime) -> MaintenanceRunQuerySet:
        """Runs no worker is carrying out: running with an expired lease (the worker was killed or
        lost its host), or queued for longer than a lease (the broker lost the task)."""
        lost = now - timedelta(seconds=settings.MAINTENANCE_LEASE_SECONDS)
        return self.filter(
            Q(status=MaintenanceRun.Status.RUNNING, lease_until__lt=now)
            | Q(status=MaintenanceRun.Status.QUEUED, queued_at__lt=lost)
        )

    def unplanned(self, *, now: datetime) -> MaintenanceRunQuerySet:
        """Runs still waiting for their plan a lease after the request: the plan task was lost
        (the broker was down when the request was stored, or lost the message)."""
        lost = now - timedelta(seconds=settings.MAINTENANCE_LEASE_SECONDS)
        return self.filter(status=MaintenanceRun.Status.PLANNING, requested_at__lt=lost)

    def take_lease(self, pk: int, *, owner: str, now: datetime, seconds: int) -> bool:
        """Start (queued) or take over (running, lease expired) a run; False if a live worker has it.

        A conditional UPDATE, so two workers given the same run cannot both proceed.
        """
        startable = Q(status=MaintenanceRun.Status.QUEUED) | Q(
            status=MaintenanceRun.Status.RUNNING, lease_until__lt=now
        )
        updated = self.filter(startable, pk=pk).update(
            status=MaintenanceRun.Status.RUNNING, worker=owner, lease_until=now + timedelta(seconds=seconds)
        )
        return updated == 1

    def renew_lease(self, pk: int, *, owner: str, now: datetime, seconds: int, **progress) -> bool:
        """Extend the lease and store progress; False when another worker took the run over."""
        updated = self.filter(pk=pk, worker=owner, status=MaintenanceRun.Status.RUNNING).update(
            lease_until=now + timedelta(seconds=seconds), **progress
        )
        return updated == 1


class MaintenanceRun(models.Model):
    """One maintenance action on one checkpoint, from request to result."""

    class Status(models.TextChoices):
        PLANNING = "planning"
        PLANNED = "planned", "planned, awaiting confirmation"
        NOTHING_TO_DO = "nothing", "nothing to do"
        REFUSED = "refused", "refused by a precondition"
        AWAITING_APPROVAL = "approval", "confirmed, awaiting approval"
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        CANCELLED = "cancelled"

    ACTIVE_STATUSES = (Status.QUEUED, Status.RUNNING)
    WAITING_STATUSES = (Status.PLANNING, Status.PLANNED, Status.AWAITING_APPROVAL)
    CONFIRMABLE_STATUSES = (Status.PLANNED,)
    FINAL_STATUSES = (Status.NOTHING_TO_DO, Status.REFUSED, Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="maintenance_runs")
    action = models.CharField(max_length=20, choices=MaintenanceAction.choices)
    parameters = models.JSONField(
        default=dict, blank=True, help_text="What the plan was asked for (thresholds, stores)."
    )
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.PLANNING)
    policy = models.ForeignKey(
        "MaintenancePolicy",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
        help_text="Set when a scheduled policy started the run instead of a person.",
    )

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    plan = models.JSONField(null=True, blank=True, help_text="The MaintenancePlan as the worker stored it (as_json).")
    planned_at = models.DateTimeField(null=True, blank=True)
    plan_error = models.TextField(blank=True, help_text="Why no plan could be made (an unreadable file, storage down).")

    reason = models.TextField(blank=True, help_text="Why the person who confirmed wants this done.")
    override_query_running = models.BooleanField(
        default=False,
        help_text="Confirmed although the query looked running (the only precondition that can be overridden).",
    )
    confirmed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    confirmed_at = models.DateTimeField(null=True, blank=True)
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)

    queued_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True)
    lease_until = models.DateTimeField(
        null=True, blank=True, help_text="The running worker renews this; past it, another worker resumes the run."
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    backup_pruned_at = models.DateTimeField(
        null=True, blank=True, help_text="When the retention job deleted this run's backup; no undo after it."
    )
    attempts = models.PositiveSmallIntegerField(default=0, help_text="Workers that started or resumed the run.")
    steps_done = models.PositiveIntegerField(default=0)
    steps_total = models.PositiveIntegerField(default=0)
    current_step = models.CharField(max_length=1100, blank=True)
    result = models.JSONField(null=True, blank=True, help_text="What was written, deleted, skipped, and bytes freed.")
    error = models.TextField(blank=True)

    objects = MaintenanceRunQuerySet.as_manager()

    class Meta:
        constraints = [
            # The per-checkpoint lock: at most one queued or running maintenance run.
            models.UniqueConstraint(
                fields=["checkpoint"], condition=Q(status__in=["queued", "running"]), name="one_active_maintenance_run"
            )
        ]
        indexes = [models.Index(fields=["checkpoint", "-requested_at"], name="maintenance_run_recent")]
        permissions = [
            ("plan_maintenance", "Can ask for a maintenance plan"),
            ("run_maintenance", "Can confirm and run maintenance"),
            ("approve_maintenance", "Can approve maintenance confirmed by someone else"),
            ("rewind_checkpoint", "Can confirm and approve a rewind"),
            ("skip_batch", "Can confirm and approve a skip"),
            ("repair_checkpoint", "Can confirm and approve a repair"),
            ("undo_maintenance", "Can confirm and approve an undo"),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} on {self.checkpoint} (#{self.pk})"

    def get_absolute_url(self) -> str:
        return reverse("dashboards:maintenance-run", args=[self.checkpoint_id, self.pk])

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATUSES

    @property
    def progress_percent(self) -> int:
        if not self.steps_total:
            return 100 if self.status == self.Status.SUCCEEDED else 0
        return min(100, round(100 * self.steps_done / self.steps_total))

    @property
    def maintenance_plan(self):
        """The stored plan as the library's MaintenancePlan (None before planning)."""
        return None if self.plan is None else plan_from_json(self.plan)

    def needs_approval(self) -> bool:
        if self.policy_id is not None:
            return False
        risky = self.action in MaintenanceAction.risky() and settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL
        return settings.MAINTENANCE_REQUIRES_APPROVAL or risky

    @property
    def backup_dir(self) -> str | None:
        """The backup this run writes (or, for an undo, restores from); None for the actions that keep none."""
        if self.action not in MaintenanceAction.risky():
            return None
        return self.parameters.get("backup_dir")

    def undo_runs(self) -> MaintenanceRunQuerySet:
        """Undo runs asked for this run (by its backup directory), newest first, but not those that changed nothing."""
        if self.action == MaintenanceAction.UNDO or not self.backup_dir:
            return MaintenanceRun.objects.none()
        dropped = (self.Status.CANCELLED, self.Status.REFUSED, self.Status.NOTHING_TO_DO, self.Status.FAILED)
        return (
            MaintenanceRun.objects.filter(
                checkpoint_id=self.checkpoint_id, action=MaintenanceAction.UNDO, parameters__backup_dir=self.backup_dir
            )
            .exclude(status__in=dropped)
            .order_by("-requested_at")
        )

    def undone_run(self) -> MaintenanceRun | None:
        """For an undo, the run whose backup it restores from."""
        if self.action != MaintenanceAction.UNDO or not self.backup_dir:
            return None
        runs = MaintenanceRun.objects.filter(checkpoint_id=self.checkpoint_id, parameters__backup_dir=self.backup_dir)
        return runs.exclude(action=MaintenanceAction.UNDO).first()

    def why_not_undoable(self) -> str | None:
        """Why no undo is offered (None when it is): only a succeeded risky run with a backup, not undone yet.

        Whether the backup is still in storage is the undo plan's to say (the web process reads no storage)."""
        if self.action not in MaintenanceAction.risky() or self.action == MaintenanceAction.UNDO:
            return "only a rewind, a skip or a repair keeps a backup to undo from"
        if self.status != self.Status.SUCCEEDED:
            return f"it is {self.get_status_display()}, not succeeded"
        if not self.backup_dir:
            return "it kept no backup"
        if self.backup_pruned_at is not None:
            return f"its backup was pruned on {self.backup_pruned_at:%Y-%m-%d %H:%M} UTC, after the retention period"
        undo = self.undo_runs().first()
        if undo is not None:
            return f"undo run #{undo.pk} is {undo.get_status_display()}"
        return None

    def can_be_undone(self) -> bool:
        return self.why_not_undoable() is None

    def requester_name(self) -> str:
        """Who asked for the run: its policy, its user, else the name its plan request was audited under
        (a command line's: the OS user and the command; a deleted user's name)."""
        if self.policy_id is not None:
            return f"policy #{self.policy_id}"
        if self.requested_by is not None:
            return self.requested_by.get_username()
        return self._audited_actor_name(AuditEntry.Event.PLAN_REQUESTED) or "—"

    def confirmer_name(self) -> str:
        """Who confirmed the run: its user, else the name the confirmation was audited under (a policy's or a
        command line's)."""
        if self.confirmed_by is not None:
            return self.confirmed_by.get_username()
        return self._audited_actor_name(AuditEntry.Event.CONFIRMED) or "—"

    def _audited_actor_name(self, event: str) -> str:
        # All entries, filtered here: the runs list prefetches them (one query for the page, not two a run).
        entries = [entry for entry in self.audit_entries.all() if entry.event == event]
        first = min(entries, key=lambda entry: (entry.at, entry.pk), default=None)
        return "" if first is None else first.actor_name

    def confirm(self, user, *, reason: str, override_query_running: bool, now: datetime, actor_name: str = "") -> None:
        """The requester's confirmation: queued at once, or waiting for a second person's approval.

        ``actor_name`` names a confirmer without a user (a shell user's command); no user and no
        name is a policy. Raises MaintenanceRefused when the run cannot be confirmed; the caller
        shows the message.
        """
        self._check_confirmable(override_query_running=override_query_running, now=now)
        self.reason, self.override_query_running = reason, override_query_running
        self.confirmed_by, self.confirmed_at = user, now
        self._audit_confirmation(user, actor_name or ("" if user is not None else "policy"))
        if self.needs_approval():
            self.status = self.Status.AWAITING_APPROVAL
            self.save(update_fields=["reason", "override_query_running", "confirmed_by", "confirmed_at", "status"])
            return
        self._queue(now=now, fields=["reason", "override_query_running", "confirmed_by", "confirmed_at"])

    def _check_confirmable(self, *, override_query_running: bool, now: datetime) -> None:
        """Raise MaintenanceRefused unless the run awaits confirmation with a fresh plan whose checks pass.

        The slot check ("no-other-maintenance") is left to the queueing, which holds the slot.
        """
        if self.status not in self.CONFIRMABLE_STATUSES:
            raise MaintenanceRefused(f"run #{self.pk} is {self.get_status_display()}, not awaiting confirmation")
        if self.plan_is_stale(now=now):
            raise MaintenanceRefused("the plan is too old to confirm; ask for a new plan")
        overrides = {"query-stopped"} if override_query_running else set()
        failed = [
            p
            for p in self.maintenance_plan.failed_preconditions(overrides=overrides)
            if p.name != "no-other-maintenance"
        ]
        if failed:
            raise MaintenanceRefused("; ".join(f"{p.name}: {p.detail}" for p in failed))

    def _audit_confirmation(self, user, who: str) -> None:
        """Record the confirmation, and the override of the query-stopped check when there is one."""
        AuditEntry.record(AuditEntry.Event.CONFIRMED, actor=user, actor_name=who, run=self, detail=self.reason)
        if self.override_query_running:
            AuditEntry.record(
                AuditEntry.Event.OVERRIDDEN,
                actor=user,
                actor_name=who,
                run=self,
                detail="query-stopped overridden: " + self.reason,
            )

    def record_refused_confirmation(self, user, *, why: str, typed: dict[str, str], actor_name: str = "") -> AuditEntry:
        """Audit a confirmation that was refused (a wrong name, a failed precondition...), with what was typed.

        ``actor_name`` names a confirmer without a user, as in ``confirm`` (a command line's)."""
        given = typed.get("reason", "").strip()
        detail = f"confirmation refused: {why.rstrip('.')}." + (f" Reason typed: “{given}”." if given else "")
        return AuditEntry.record(
            AuditEntry.Event.REFUSED, actor=user, actor_name=actor_name, run=self, detail=detail, data={"typed": typed}
        )

    def approve(self, user, *, now: datetime) -> None:
        """A second person's approval; never the one who confirmed."""
        if self.status != self.Status.AWAITING_APPROVAL:
            raise MaintenanceRefused(f"run #{self.pk} is {self.get_status_display()}, not awaiting approval")
        if user.pk == self.confirmed_by_id:
            raise MaintenanceRefused("the approval must come from someone other than the person who confirmed")
        if self.plan_is_stale(now=now):
            raise MaintenanceRefused("the plan is too old to approve; ask for a new plan")
        self.approved_by, self.approved_at = user, now
        AuditEntry.record(AuditEntry.Event.APPROVED, actor=user, run=self)
        self._queue(now=now, fields=["approved_by", "approved_at"])

    def _queue(self, *, now: datetime, fields: list[str]) -> None:
        self.status, self.queued_at = self.Status.QUEUED, now
        try:
            with transaction.atomic():
                self.save(update_fields=[*fields, "status", "queued_at"])
        except IntegrityError:
            raise MaintenanceRefused(
                "another maintenance run of this checkpoint is queued or running; wait for it"
            ) from None

    def cancel(self, user, *, reason: str = "") -> None:
        if self.status in self.FINAL_STATUSES or self.status == self.Status.RUNNING:
            raise MaintenanceRefused(f"run #{self.pk} is {self.get_status_display()} and cannot be cancelled")
        self.status, self.finished_at = self.Status.CANCELLED, timezone.now()
        self.save(update_fields=["status", "finished_at"])
        AuditEntry.record(AuditEntry.Event.CANCELLED, actor=user, run=self, detail=reason)

    def plan_is_stale(self, *, now: datetime) -> bool:
        """A plan describes the checkpoint as it was; past the configured age it must be made again."""
        return self.planned_at is None or now - self.planned_at > timedelta(
            seconds=settings.MAINTENANCE_PLAN_MAX_AGE_SECONDS
        )


class MaintenancePolicy(models.Model):
    """A scheduled action, e.g. "snapshot stores whose delta chain is over 50 deltas, every hour".

    Celery beat starts it (a django-celery-beat PeriodicTask); a run is planned, and applied only
    when every precondition holds. Creating the policy is the confirmation, so it records who and why.
    """

    checkpoint = models.ForeignKey(Checkpoint, on_delete=models.CASCADE, related_name="maintenance_policies")
    action = models.CharField(max_length=20, choices=MaintenanceAction.scheduled())
    parameters = models.JSONField(default=dict, blank=True)
    interval_seconds = models.PositiveIntegerField(default=3600)
    is_enabled = models.BooleanField("enabled", default=True)
    reason = models.TextField(help_text="Why this runs unattended; copied into each run's audit entries.")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "maintenance policies"

    def save(self, *args, **kwargs) -> None:
        super().save(*args, **kwargs)
        schedule_policy(self)

    def delete(self, *args, **kwargs):
        unschedule_policy(self)
        return super().delete(*args, **kwargs)

    def __str__(self) -> str:
        return f"{self.get_action_display()} on {self.checkpoint} every {self.interval_seconds} s"


class AuditEntryQuerySet(models.QuerySet):
    def recent(self) -> AuditEntryQuerySet:
        return self.select_related("checkpoint", "run").order_by("-at", "-pk")


class AuditEntry(models.Model):
    """Who did what, when, why, and how it ended. Written once; the admin and the UI only read it."""

    class Event(models.TextChoices):
        PLAN_REQUESTED = "plan-requested"
        PLANNED = "planned"
        PLAN_FAILED = "plan-failed"
        CONFIRMED = "confirmed"
        APPROVED = "approved"
        OVERRIDDEN = "overridden", "precondition overridden"
        CANCELLED = "cancelled"
        STARTED = "started"
        RESUMED = "resumed"
        REFUSED = "refused"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        POLICY_CHANGED = "policy-changed"
        LOGIN_FAILED = "login-failed"
        REGISTERED = "registered", "checkpoint registered"
        EDITED = "edited", "checkpoint edited"
        ARCHIVED = "archived", "checkpoint archived"
        RESTORED = "restored", "checkpoint restored"
        REMOVED = "removed", "checkpoint removed"
        REGISTRATION_REFUSED = "registration-refused", "registration refused"
        EDIT_REFUSED = "edit-refused", "checkpoint edit refused"
        BACKUP_PRUNED = "backup-pruned", "backup pruned"

    at = models.DateTimeField(default=timezone.now, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_name = models.CharField(
        max_length=150, help_text="The user name, or 'policy'/'worker', kept if the user is deleted."
    )
    event = models.CharField(max_length=30, choices=Event.choices)
    checkpoint = models.ForeignKey(
        Checkpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    checkpoint_name = models.CharField(max_length=200, blank=True)
    run = models.ForeignKey(
        MaintenanceRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    detail = models.TextField(blank=True)
    data = models.JSONField(default=dict, blank=True)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.event}"

    @classmethod
    def record(
        cls,
        event: str,
        *,
        actor=None,
        actor_name: str = "",
        run: MaintenanceRun | None = None,
        checkpoint: Checkpoint | None = None,
        checkpoint_name: str = "",
        detail: str = "",
        data: dict | None = None,
    ) -> AuditEntry:
        """Write one entry; the checkpoint defaults to the run's, the name to the actor's.

        ``checkpoint_name`` overrides the checkpoint's: a refused registration has no row, and a
        refused edit's instance holds the refused values."""
        checkpoint = checkpoint if checkpoint is not None else (run.checkpoint if run is not None else None)
        name = actor_name or (actor.get_username() if actor is not None else "system")
        return cls.objects.create(
            event=event,
            actor=actor,
            actor_name=name,
            run=run,
            checkpoint=checkpoint,
            checkpoint_name=(checkpoint_name or (checkpoint.name if checkpoint is not None else ""))[:200],
            detail=detail,
            data=data or {},
        )

    def save(self, *args, **kwargs) -> None:
        if self.pk is not None:
            raise ValueError("audit entries are written once and never changed")
        super().save(*args, **kwargs)
