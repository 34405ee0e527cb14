"""Planning and running maintenance for the web side: stored plans, a lease, progress, audit.

The tasks in workers.tasks call these. ``make_plan`` stores what the library planned, adding the
preconditions only the database knows (live progress from the listener, other runs).
``execute_run`` plans again from the checkpoint as it is now, does only what both the confirmed
and the fresh plan contain (``restrict_to_confirmed``), renews its lease at every step, and
records the result. A worker killed at any point leaves the run RUNNING with a lease that
expires; ``resume_interrupted`` hands it to another worker, which finishes the same plan.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from dashboards.models import AuditEntry, BatchProgress, Checkpoint, MaintenanceRun
from workers import maintenance_actions
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.maintenance.plan import (
    MaintenancePlan,
    Precondition,
    each_once,
    plan_from_json,
    restrict_to_confirmed,
)
from workers.checkpoint.wording import plural

log = logging.getLogger(__name__)

# Test seam for the fault-injection suite (a failpoint, as databases have): when this variable
# names a file holding a number N, the worker removes the file and kills itself with SIGKILL right
# before storage step N of the next run. Unset in every real deployment.
FAILPOINT_ENV = "CKPTWEB_FAILPOINT_MAINTENANCE_FILE"
# Progress and lease go to the database at most this often, not at every file.
PROGRESS_EVERY_SECONDS = 0.5


def make_plan(run_id: int, *, now: datetime | None = None) -> MaintenanceRun:
    """Compute and store the plan of a requested run; the run ends PLANNED, NOTHING_TO_DO or REFUSED."""
    now = now or timezone.now()
    run = MaintenanceRun.objects.select_related("checkpoint").get(pk=run_id)
    if run.status != MaintenanceRun.Status.PLANNING:
        return run
    try:
        plan = _plan_with_database_checks(run, now=now)
    except (CheckpointError, ValueError, TypeError) as exc:
        # TypeError/ValueError: parameters the planner does not take (a policy edited in the admin).
        return _refuse_unplannable(run, str(exc), now=now)
    return _store_plan(run, plan, now=now)


def _refuse_unplannable(run: MaintenanceRun, error: str, *, now: datetime) -> MaintenanceRun:
    """End a run the library could not plan: REFUSED, with the planner's error audited."""
    run.status, run.plan_error, run.planned_at = MaintenanceRun.Status.REFUSED, error, now
    run.save(update_fields=["status", "plan_error", "planned_at"])
    AuditEntry.record(AuditEntry.Event.PLAN_FAILED, actor_name="worker", run=run, detail=error)
    return run


def _store_plan(run: MaintenanceRun, plan: MaintenancePlan, *, now: datetime) -> MaintenanceRun:
    """Save the plan and the status it leads to (PLANNED, NOTHING_TO_DO or REFUSED), and audit it."""
    run.plan, run.planned_at = plan.as_json(), now
    run.status = _status_of_plan(plan)
    run.save(update_fields=["plan", "planned_at", "status"])
    AuditEntry.record(
        AuditEntry.Event.PLANNED if run.status != MaintenanceRun.Status.REFUSED else AuditEntry.Event.REFUSED,
        actor_name="worker",
        run=run,
        detail=_plan_headline(plan),
        data={"bytes_freed": plan.bytes_freed, "files_deleted": len(plan.deletes), "files_written": len(plan.writes)},
    )
    return run


def _status_of_plan(plan: MaintenancePlan) -> str:
    if plan.is_empty:
        return MaintenanceRun.Status.NOTHING_TO_DO
    # Only "the query looks running" can be overridden at confirmation; anything else refuses.
    if not plan.is_allowed(overrides={"query-stopped"}):
        return MaintenanceRun.Status.REFUSED
    return MaintenanceRun.Status.PLANNED


def _plan_headline(plan: MaintenancePlan) -> str:
    failed = plan.failed_preconditions()
    if failed:
        return plan.summary + " Refused: " + "; ".join(f"{p.name}: {p.detail}" for p in failed)
    return plan.summary


def _plan_with_database_checks(run: MaintenanceRun, *, now: datetime) -> MaintenancePlan:
    plan = maintenance_actions.plan(run.checkpoint, run.action, run.parameters, now=now.timestamp())
    extra = (_no_live_progress(run, now=now), _no_batch_found_lately(run, now=now), _no_other_run(run))
    return MaintenancePlan(
        action=plan.action,
        parameters=plan.parameters,
        writes=plan.writes,
        deletes=plan.deletes,
        preconditions=each_once(plan.preconditions + extra),
        summary=plan.summary,
        planned_at=plan.planned_at,
        notes=plan.notes,
    )


def _no_live_progress(run: MaintenanceRun, *, now: datetime) -> Precondition:
    """ "query-stopped" as the listener sees it: no progress event of this checkpoint's batches received lately.

    As in the health model, progress past the checkpoint's heard_ceiling
    (CheckpointQuerySet.with_progress_owner) is another checkpoint's of the same query id (a copy,
    a restored backup, still running elsewhere) and says nothing about this one.
    """
    quiet = settings.MAINTENANCE_QUIET_SECONDS
    latest = _latest_progress_received(run)
    if latest is None or now - latest >= timedelta(seconds=quiet):
        detail = (
            "no progress received for this checkpoint's batches"
            if latest is None
            else f"last progress received {int((now - latest).total_seconds())} s ago"
        )
        return Precondition("query-stopped", True, detail)
    ago = max(0, int((now - latest).total_seconds()))
    return Precondition("query-stopped", False, f"the query reported progress {ago} s ago; it is running")


def _latest_progress_received(run: MaintenanceRun) -> datetime | None:
    """When the listener last sent progress of this checkpoint's batches (None: never, or no query id)."""
    checkpoint = Checkpoint.objects.with_progress_owner().get(pk=run.checkpoint_id)
    if not checkpoint.query_id:
        return None
    progress = BatchProgress.objects.filter(query_id=checkpoint.query_id)
    if checkpoint.heard_ceiling is not None:
        progress = progress.filter(batch_id__lte=checkpoint.heard_ceiling)
    return progress.order_by("-received_at").values_list("received_at", flat=True).first()


def _no_batch_found_lately(run: MaintenanceRun, *, now: datetime) -> Precondition:
    """ "query-stopped" on this server's clock: no sync lately found a batch the sync before it had not.

    File dates come from the storage's clock or a writer's, which can be off (the library reads
    the storage's, but a client that stamps its own files can still lie); the times of our own
    syncs cannot. Two syncs inside the quiet period, the later one finding new batches or
    commits, prove a batch was written within it.
    """
    since = now - timedelta(seconds=settings.MAINTENANCE_QUIET_SECONDS)
    syncs = list(
        run.checkpoint.sync_runs.read_to_the_end_since(since).values("started_at", "new_batches", "new_commits")
    )
    for earlier, later in zip(syncs, syncs[1:], strict=False):
        if later["new_batches"] or later["new_commits"]:
            return _batch_found_between(earlier, later, now=now)
    return Precondition(
        "query-stopped", True, f"no sync in the last {settings.MAINTENANCE_QUIET_SECONDS} s found a new batch"
    )


def _batch_found_between(earlier: dict, later: dict, *, now: datetime) -> Precondition:
    """The failed "query-stopped": the ``later`` sync found batches or commits the ``earlier`` one had not."""
    batches = plural(later["new_batches"], "new batch", "new batches")
    found = f"{batches} and {plural(later['new_commits'], 'new commit')}"
    ago = int((now - later["started_at"]).total_seconds())
    since_earlier = int((later["started_at"] - earlier["started_at"]).total_seconds())
    return Precondition(
        "query-stopped",
        False,
        f"a sync {ago} s ago found {found} written since the sync {since_earlier} s before it; the query is running",
    )


def _no_other_run(run: MaintenanceRun) -> Precondition:
    other = MaintenanceRun.objects.active().filter(checkpoint=run.checkpoint).exclude(pk=run.pk).first()
    if other is None:
        return Precondition("no-other-maintenance", True, "no other maintenance run is queued or running")
    return Precondition(
        "no-other-maintenance", False, f"run #{other.pk} ({other.get_action_display()}) is {other.status}"
    )


def execute_run(run_id: int, *, owner: str) -> MaintenanceRun:
    """Apply a queued (or interrupted) run's confirmed plan; returns the run as it ended."""
    now = timezone.now()
    if not MaintenanceRun.objects.take_lease(run_id, owner=owner, now=now, seconds=settings.MAINTENANCE_LEASE_SECONDS):
        return MaintenanceRun.objects.get(pk=run_id)
    run = _start_attempt(run_id, owner=owner, now=now)
    return _apply_recording_failures(run, owner=owner)


def _apply_recording_failures(run: MaintenanceRun, *, owner: str) -> MaintenanceRun:
    """``_apply``, ending the run FAILED on an error (an unexpected one is raised again)."""
    try:
        return _apply(run, owner=owner)
    except LeaseLost as exc:
        # The run is another worker's now (this one stalled past its lease): it records the end.
        log.warning("%s", exc)
        return MaintenanceRun.objects.get(pk=run.pk)
    except CheckpointError as exc:
        return _finish(run, MaintenanceRun.Status.FAILED, owner=owner, error=str(exc))
    except Exception as exc:
        _finish(run, MaintenanceRun.Status.FAILED, owner=owner, error=f"unexpected {type(exc).__name__}: {exc}")
        raise


def _start_attempt(run_id: int, *, owner: str, now: datetime) -> MaintenanceRun:
    """Count one more attempt at the run (leased to ``owner``) and audit it as started or resumed."""
    run = MaintenanceRun.objects.select_related("checkpoint").get(pk=run_id)
    resumed = run.attempts > 0
    run.attempts += 1
    run.started_at = run.started_at or now
    run.save(update_fields=["attempts", "started_at"])
    AuditEntry.record(
        AuditEntry.Event.RESUMED if resumed else AuditEntry.Event.STARTED,
        actor_name="worker",
        run=run,
        detail=f"worker {owner}",
    )
    return run


class LeaseLost(Exception):
    """Another worker took the run over after this one's lease expired; this one must stop and write nothing."""


def _apply(run: MaintenanceRun, *, owner: str) -> MaintenanceRun:
    confirmed = plan_from_json(run.plan)
    fresh = _plan_with_database_checks(run, now=timezone.now())
    plan, skipped = restrict_to_confirmed(confirmed, fresh)
    refusal = _preconditions_no_longer_holding(run, plan)
    if refusal:
        return _finish(run, MaintenanceRun.Status.REFUSED, owner=owner, error=refusal)
    hook = _ProgressHook(run, owner=owner)
    applied = maintenance_actions.apply(run.checkpoint, run.parameters, plan, on_step=hook)
    return _finish(run, MaintenanceRun.Status.SUCCEEDED, owner=owner, result=_result_of(applied, skipped))


def _preconditions_no_longer_holding(run: MaintenanceRun, plan: MaintenancePlan) -> str:
    """The refusal naming the fresh plan's failed preconditions, or "" when they all hold."""
    overrides = {"query-stopped"} if run.override_query_running else set()
    failed = [p for p in plan.failed_preconditions(overrides=overrides) if p.name != "no-other-maintenance"]
    if not failed:
        return ""
    return "preconditions no longer hold: " + "; ".join(f"{p.name}: {p.detail}" for p in failed)


def _result_of(applied, skipped) -> dict:
    """The run's stored result: what the apply wrote, deleted, found done already, and skipped."""
    return {
        "written": list(applied.written),
        "deleted": list(applied.deleted),
        "already_done": list(applied.skipped_writes) + list(applied.already_absent),
        "skipped": list(skipped),
        "bytes_freed": applied.bytes_freed,
    }


class _ProgressHook:
    """The on_step hook: progress and lease in the database, and the failpoint."""

    def __init__(self, run: MaintenanceRun, *, owner: str) -> None:
        self.run, self.owner, self.last_saved = run, owner, 0.0
        self.kill_at = _failpoint_step()
        self.calls = 0

    def __call__(self, operation: str, path: str, done: int, total: int) -> None:
        if self.kill_at is not None and self.calls == self.kill_at:
            _fire_failpoint()
        self.calls += 1
        clock = time.monotonic()
        if clock - self.last_saved < PROGRESS_EVERY_SECONDS and operation != "done":
            return
        self.last_saved = clock
        kept = MaintenanceRun.objects.renew_lease(
            self.run.pk,
            owner=self.owner,
            now=timezone.now(),
            seconds=settings.MAINTENANCE_LEASE_SECONDS,
            steps_done=done,
            steps_total=total,
            current_step=f"{operation} {path}".strip()[:1100],
        )
        if not kept:
            raise LeaseLost(f"maintenance run #{self.run.pk} was taken over by another worker; {self.owner} stops")


def _failpoint_step() -> int | None:
    path = os.environ.get(FAILPOINT_ENV)
    if not path:
        return None
    try:
        with open(path) as handle:
            raw = handle.read().strip()
    except FileNotFoundError:
        return None
    return int(raw) if raw.isdigit() else None


def _fire_failpoint() -> None:
    """Die as a killed worker does: no cleanup, no exception handler, nothing flushed."""
    os.unlink(os.environ[FAILPOINT_ENV])
    os.kill(os.getpid(), signal.SIGKILL)


def _finish(
    run: MaintenanceRun, status: str, *, owner: str, result: dict | None = None, error: str = ""
) -> MaintenanceRun:
    """Record the end, only while ``owner`` still holds the run: a worker that stalled past its lease
    while another took the run over writes nothing, and the run as the new owner has it is returned."""
    run.refresh_from_db(fields=["steps_done", "steps_total", "current_step"])
    run.status, run.finished_at, run.lease_until = status, timezone.now(), None
    run.result, run.error = result, error
    if status == MaintenanceRun.Status.SUCCEEDED:
        run.steps_done = run.steps_total
    if not _save_end_while_owner(run, owner=owner):
        log.warning(
            "maintenance run #%s was taken over by another worker before %s could record its end (%s)",
            run.pk,
            owner,
            status,
        )
        return MaintenanceRun.objects.get(pk=run.pk)
    _audit_end(run, status, result=result, error=error)
    return run


def _audit_end(run: MaintenanceRun, status: str, *, result: dict | None, error: str) -> None:
    event = {
        MaintenanceRun.Status.SUCCEEDED: AuditEntry.Event.SUCCEEDED,
        MaintenanceRun.Status.REFUSED: AuditEntry.Event.REFUSED,
    }.get(status, AuditEntry.Event.FAILED)
    detail = error or _result_headline(result or {})
    AuditEntry.record(event, actor_name="worker", run=run, detail=detail, data=result or {})


def _save_end_while_owner(run: MaintenanceRun, *, owner: str) -> bool:
    """Write the run's end fields if ``owner`` still holds it RUNNING; False when another worker does."""
    ended = MaintenanceRun.objects.filter(pk=run.pk, worker=owner, status=MaintenanceRun.Status.RUNNING).update(
        status=run.status,
        finished_at=run.finished_at,
        lease_until=None,
        result=run.result,
        error=run.error,
        steps_done=run.steps_done,
    )
    return bool(ended)


def _result_headline(result: dict) -> str:
    return (
        f"wrote {len(result.get('written', []))} files, deleted {len(result.get('deleted', []))}, "
        f"freed {result.get('bytes_freed', 0)} bytes"
    )


def interrupted_run_ids(*, now: datetime | None = None) -> list[int]:
    """Runs whose worker died: their lease expired while RUNNING."""
    return list(MaintenanceRun.objects.interrupted(now=now or timezone.now()).values_list("pk", flat=True))


def unplanned_run_ids(*, now: datetime | None = None) -> list[int]:
    """Runs whose plan task was lost: planned again by celery beat's resume task."""
    return list(MaintenanceRun.objects.unplanned(now=now or timezone.now()).values_list("pk", flat=True))


def start_policy_run(policy_id: int, *, now: datetime | None = None) -> int | None:
    """Plan a policy's action; queue it (as confirmed by the policy) only if it may run now.

    Returns the id of the queued run, or None when there was nothing to do or a precondition
    failed (the run row and its audit entries say which). Policies never override anything.
    """
    from dashboards.models import MaintenancePolicy, MaintenanceRefused

    now = now or timezone.now()
    policy = MaintenancePolicy.objects.select_related("checkpoint").get(pk=policy_id)
    if not policy.is_enabled:
        return None
    run = _plan_for_policy(policy, now=now)
    if run.status != MaintenanceRun.Status.PLANNED:
        return None
    try:
        run.confirm(None, reason=f"policy #{policy.pk}: {policy.reason}", override_query_running=False, now=now)
    except MaintenanceRefused as exc:
        _refuse_policy_run(run, str(exc), now=now)
        return None
    return run.pk


def _refuse_policy_run(run: MaintenanceRun, error: str, *, now: datetime) -> None:
    """End a policy's run that confirmation refused, auditing the refusal as the policy's."""
    run.status, run.error, run.finished_at = MaintenanceRun.Status.REFUSED, error, now
    run.save(update_fields=["status", "error", "finished_at"])
    AuditEntry.record(AuditEntry.Event.REFUSED, actor_name="policy", run=run, detail=error)


def _plan_for_policy(policy, *, now: datetime) -> MaintenanceRun:
    """A run of the policy's action, requested by the policy (audited so) and planned."""
    run = MaintenanceRun.objects.create(
        checkpoint=policy.checkpoint,
        action=policy.action,
        parameters=policy.parameters,
        policy=policy,
        requested_at=now,
    )
    AuditEntry.record(AuditEntry.Event.PLAN_REQUESTED, actor_name="policy", run=run, detail=policy.reason)
    return make_plan(run.pk, now=now)
