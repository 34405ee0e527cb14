"""`manage.py rewind_checkpoint PATH_OR_URL --to-batch N [--yes --reason WHY]`: plan (and apply) a rewind.

The next run of the query starts at batch N + 1 as it did the first time; see
dashboards/management/maintenance_command.py for what every risky command shares.
"""

from typing import Any

from dashboards.management.maintenance_command import MaintenanceCommand
from dashboards.models import MaintenanceAction


class Command(MaintenanceCommand):
    help = "Print the plan of rewinding a checkpoint to batch N; apply it with --yes."
    action = MaintenanceAction.REWIND

    def add_action_arguments(self, parser) -> None:
        parser.add_argument(
            "--to-batch", type=int, required=True, metavar="N", help="A committed batch still in the logs."
        )

    def parameters(self, options: dict[str, Any]) -> dict[str, Any]:
        return {"to_batch": options["to_batch"]}
