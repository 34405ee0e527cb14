"""The base of the risky maintenance commands (rewind_checkpoint, skip_batch, repair_checkpoint,
undo_maintenance): on-call's way to the same runs as the web page's, without the web.

A command prints the plan and changes nothing; with ``--yes`` it applies it. On a registered
checkpoint (named by its URL or its name) it makes a MaintenanceRun as the page does: planned and
run by the worker's own functions, in this process, with the same preconditions, lease, one run
at a time, backup (``_ckptweb_backup/run-<pk>``) and audit entries, so the run shows on the page
and can be undone there. On any other path it must be inside CKPTWEB_CHECKPOINT_ROOTS; the plan
is made and applied from storage alone and audited under the path.

What the page would refuse, the command refuses, with the reason and exit status 1: a path outside
the roots, a plan refused by a precondition, nothing to do, another run queued or running. The
second person's approval cannot be given on a shell: when it is required, ``--yes`` on a
registered checkpoint confirms the run and leaves it awaiting approval on its page (exit status
2, nothing applied); on an unregistered path it is refused. Shell access is storage access, so
the command checks no ckptweb permission; the audit names the shell user.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q
from django.utils import timezone

from dashboards.management.command_line import command_line_actor
from dashboards.models import AuditEntry, Checkpoint, MaintenanceRefused, MaintenanceRun, backup_dir_of_run
from dashboards.models.maintenance import BACKUP_ROOT
from workers import maintenance_actions, maintenance_runs
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.maintenance.plan import MaintenancePlan, plan_from_json

# Exit status of a run confirmed from the shell that waits for a second person's approval.
AWAITING_APPROVAL_EXIT = 2


class MaintenanceCommand(BaseCommand):
    """One risky action from the shell; a subclass names ``action`` and turns its options into parameters."""

    action: str = ""

    def add_arguments(self, parser) -> None:
        parser.add_argument("target", metavar="PATH_OR_URL", help="A registered checkpoint's URL or name, or a path.")
        self.add_action_arguments(parser)
        parser.add_argument("--yes", action="store_true", help="Apply the plan (without it, only print it).")
        parser.add_argument("--reason", default="", help="Why, for the audit trail (required with --yes).")
        parser.add_argument(
            "--override-query-running",
            action="store_true",
            help="Apply although the query looks running (audited; the only precondition that can be overridden).",
        )

    def add_action_arguments(self, parser) -> None:
        """The action's own options."""

    def parameters(self, options: dict[str, Any]) -> dict[str, Any]:
        """The planner's parameters from the options; CommandError when they name nothing to do."""
        raise NotImplementedError

    def handle(self, *args, target: str, yes: bool, reason: str, override_query_running: bool, **options) -> None:
        if yes and len(reason.strip()) < 5:
            raise CommandError("--yes needs a --reason of at least 5 characters, kept in the audit trail")
        self.actor_name = command_line_actor(self.command_name)
        self.confirmation = {"reason": reason.strip(), "override_query_running": override_query_running}
        parameters = self.parameters(options)
        checkpoint = self.registered_checkpoint(target, options)
        if checkpoint is not None:
            self.handle_registered(checkpoint, parameters, apply=yes)
        else:
            self.handle_unregistered(target, parameters, apply=yes)

    @property
    def command_name(self) -> str:
        return self.__module__.rsplit(".", 1)[-1]

    def registered_checkpoint(self, target: str, options: dict[str, Any]) -> Checkpoint | None:
        """The checkpoint registered under this URL (with or without a trailing slash) or name, if any."""
        url = target.rstrip("/")
        return Checkpoint.objects.filter(Q(url__in=[url, url + "/"]) | Q(name=target)).first()

    # A registered checkpoint: the run goes through the worker's functions, as the page's does.

    def handle_registered(self, checkpoint: Checkpoint, parameters: dict[str, Any], *, apply: bool) -> None:
        run = maintenance_runs.make_plan(self.request_run(checkpoint, parameters).pk)
        if run.plan is not None:
            self.print_plan(plan_from_json(run.plan), run.parameters)
        self.refuse_unless_planned(run)
        if not apply:
            self.stdout.write(
                f"Nothing changed. This plan is run #{run.pk} ({run.get_absolute_url()}), to confirm on its page; "
                "or run this command again with --yes."
            )
            return
        self.confirm_and_run(run)

    def request_run(self, checkpoint: Checkpoint, parameters: dict[str, Any]) -> MaintenanceRun:
        """A new run of the action, its backup folder named after it unless given, audited as requested."""
        run = MaintenanceRun.objects.create(checkpoint=checkpoint, action=self.action, parameters=parameters)
        if "backup_dir" not in parameters:
            run.parameters = {**parameters, "backup_dir": backup_dir_of_run(run.pk)}
            run.save(update_fields=["parameters"])
        AuditEntry.record(AuditEntry.Event.PLAN_REQUESTED, actor_name=self.actor_name, run=run, data=run.parameters)
        return run

    def refuse_unless_planned(self, run: MaintenanceRun) -> None:
        if run.status == MaintenanceRun.Status.PLANNED:
            return
        if run.status == MaintenanceRun.Status.NOTHING_TO_DO:
            raise CommandError(f"nothing to do (run #{run.pk})")
        failed = "" if run.plan is None else run.maintenance_plan.failed_preconditions(overrides={"query-stopped"})
        why = run.plan_error or "; ".join(f"{p.name}: {p.detail}" for p in failed)
        raise CommandError(f"refused (run #{run.pk}): {why}")

    def confirm_and_run(self, run: MaintenanceRun) -> None:
        self.confirm(run)
        if run.status == MaintenanceRun.Status.AWAITING_APPROVAL:
            raise CommandError(
                f"run #{run.pk} is confirmed and awaits a second person's approval on its page "
                f"({run.get_absolute_url()}); nothing was applied",
                returncode=AWAITING_APPROVAL_EXIT,
            )
        run = maintenance_runs.execute_run(run.pk, owner=f"{self.actor_name} on {socket.gethostname()}")
        self.report_end(run)

    def confirm(self, run: MaintenanceRun) -> None:
        """Confirm the run as the command's caller; a refusal is recorded, then ends the command."""
        try:
            run.confirm(None, now=timezone.now(), actor_name=self.actor_name, **self.confirmation)
        except MaintenanceRefused as exc:
            typed = {"reason": self.confirmation["reason"]}
            run.record_refused_confirmation(None, why=str(exc), typed=typed, actor_name=self.actor_name)
            raise CommandError(f"refused (run #{run.pk}): {exc}") from None

    def report_end(self, run: MaintenanceRun) -> None:
        if run.status != MaintenanceRun.Status.SUCCEEDED:
            raise CommandError(f"run #{run.pk} {run.get_status_display()}: {run.error}")
        result = run.result or {}
        self.stdout.write(
            f"Run #{run.pk} succeeded: wrote {len(result.get('written', []))} files, "
            f"deleted {len(result.get('deleted', []))}. Backup: {run.backup_dir}"
        )

    # Any other path inside the allowed roots: planned and applied from storage alone.

    def handle_unregistered(self, url: str, parameters: dict[str, Any], *, apply: bool) -> None:
        parameters.setdefault("backup_dir", f"{BACKUP_ROOT}/{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        audit = {"actor_name": self.actor_name, "checkpoint_name": url}
        plan = self.plan_unregistered(url, parameters, audit)
        self.print_plan(plan, parameters)
        self.refuse_unregistered(plan, audit, apply=apply)
        if not apply:
            self.stdout.write("Nothing changed; apply this plan with --yes.")
            return
        self.apply_unregistered(url, parameters, plan, audit)

    def plan_unregistered(self, url: str, parameters: dict[str, Any], audit: dict[str, str]) -> MaintenancePlan:
        """The library's plan from storage, audited as requested and as planned (or as failed)."""
        AuditEntry.record(AuditEntry.Event.PLAN_REQUESTED, detail=self.action, data=parameters, **audit)
        try:
            plan = maintenance_actions.plan_unregistered(url, self.action, parameters, now=time.time())
        except (CheckpointError, ValueError, TypeError) as exc:
            AuditEntry.record(AuditEntry.Event.PLAN_FAILED, detail=str(exc), **audit)
            raise CommandError(f"no plan: {exc}") from None
        AuditEntry.record(AuditEntry.Event.PLANNED, detail=plan.summary, data=plan.as_json(), **audit)
        return plan

    def refuse_unregistered(self, plan: MaintenancePlan, audit: dict[str, str], *, apply: bool) -> None:
        overrides = {"query-stopped"} if self.confirmation["override_query_running"] or not apply else set()
        failed = plan.failed_preconditions(overrides=overrides)
        why = "; ".join(f"{p.name}: {p.detail}" for p in failed)
        if plan.is_empty:
            why = "nothing to do"
        elif apply and not why and settings.MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL:
            why = (
                "a second person's approval is required (CKPTWEB_MAINTENANCE_RISKY_ACTIONS_NEED_APPROVAL) and can "
                "only be given on the page of a registered checkpoint: register it (manage.py register_checkpoint)"
            )
        if why:
            AuditEntry.record(AuditEntry.Event.REFUSED, detail=why, **audit)
            raise CommandError(f"refused: {why}")

    def apply_unregistered(
        self, url: str, parameters: dict[str, Any], plan: MaintenancePlan, audit: dict[str, str]
    ) -> None:
        self.audit_unregistered_start(audit)
        try:
            applied = maintenance_actions.apply_unregistered(url, parameters, plan)
        except CheckpointError as exc:
            AuditEntry.record(AuditEntry.Event.FAILED, detail=str(exc), **audit)
            raise CommandError(f"failed: {exc}") from None
        result = {"written": list(applied.written), "deleted": list(applied.deleted)}
        AuditEntry.record(AuditEntry.Event.SUCCEEDED, detail=plan.summary, data=result, **audit)
        self.stdout.write(
            f"Applied: wrote {len(applied.written)} files, deleted {len(applied.deleted)}. "
            f"Backup: {parameters['backup_dir']}"
        )

    def audit_unregistered_start(self, audit: dict[str, str]) -> None:
        """What a page's run records on its way to being applied: confirmed, overridden, started."""
        AuditEntry.record(AuditEntry.Event.CONFIRMED, detail=self.confirmation["reason"], **audit)
        if self.confirmation["override_query_running"]:
            AuditEntry.record(AuditEntry.Event.OVERRIDDEN, detail="query-stopped overridden", **audit)
        AuditEntry.record(AuditEntry.Event.STARTED, detail=f"on {socket.gethostname()}", **audit)

    def print_plan(self, plan: MaintenancePlan, parameters: dict[str, Any]) -> None:
        self.stdout.write("\n".join(plan_lines(plan, parameters)))


def plan_lines(plan: MaintenancePlan, parameters: dict[str, Any]) -> list[str]:
    """The plan as text: what the page shows, the notes first (what cannot be undone outside the checkpoint)."""
    lines = [f"Plan: {plan.summary}", f"Backup: {parameters.get('backup_dir', '(none)')}"]
    if plan.notes:
        lines += ["", "READ BEFORE APPLYING (what cannot be undone outside the checkpoint):"]
        lines += [f"  ! {note}" for note in plan.notes]
    lines += ["", "Preconditions:"]
    lines += [f"  {'ok ' if p.ok else 'NO '} {p.name}: {p.detail}" for p in plan.preconditions]
    lines += ["", f"Files to write ({len(plan.writes)}):"]
    lines += [f"  {w.path}{' (overwrites)' if w.overwrite else ''}: {w.reason}" for w in plan.writes]
    lines += ["", f"Files to delete ({len(plan.deletes)}):"]
    lines += [f"  {d.path} ({d.size} bytes): {d.reason}" for d in plan.deletes]
    return lines + [""]
