"""`manage.py undo_maintenance PATH_OR_URL --backup DIR`, or `manage.py undo_maintenance --run ID`:
plan (and with --yes apply) the undo of a rewind, skip or repair from its backup.

``--run`` names a run of a registered checkpoint (refused as its page refuses: not succeeded,
already undone); see dashboards/management/maintenance_command.py for what every risky command shares.
"""

from typing import Any

from django.core.management.base import CommandError

from dashboards.management.maintenance_command import MaintenanceCommand
from dashboards.models import Checkpoint, MaintenanceAction, MaintenanceRun


class Command(MaintenanceCommand):
    help = "Print the plan of undoing a rewind, skip or repair from its backup; apply it with --yes."
    action = MaintenanceAction.UNDO

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        parser.set_defaults(target="")
        target = next(action for action in parser._actions if action.dest == "target")
        target.nargs = "?"

    def add_action_arguments(self, parser) -> None:
        parser.add_argument("--backup", metavar="DIR", help="The backup directory, relative to the checkpoint.")
        parser.add_argument("--run", type=int, metavar="ID", help="The run to undo (a registered checkpoint's).")

    def parameters(self, options: dict[str, Any]) -> dict[str, Any]:
        if options.get("run") is not None:
            return {"backup_dir": self.undone_run(options["run"]).backup_dir}
        if not options.get("backup"):
            raise CommandError("give --backup DIR (with PATH_OR_URL) or --run ID")
        return {"backup_dir": options["backup"]}

    def registered_checkpoint(self, target: str, options: dict[str, Any]) -> Checkpoint | None:
        if options.get("run") is not None:
            return self.undone_run(options["run"]).checkpoint
        if not target:
            raise CommandError("give PATH_OR_URL with --backup DIR, or --run ID")
        return super().registered_checkpoint(target, options)

    def undone_run(self, run_id: int) -> MaintenanceRun:
        run = MaintenanceRun.objects.select_related("checkpoint").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"no maintenance run #{run_id}")
        why = run.why_not_undoable()
        if why is not None:
            raise CommandError(f"run #{run_id} cannot be undone: {why}")
        return run
