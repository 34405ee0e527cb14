"""`manage.py repair_checkpoint PATH_OR_URL [--damage CODE] [--query-id ID]`: plan (and with --yes apply) a repair.

Without --damage every damage the integrity check finds that a repair fixes is repaired; see
dashboards/management/maintenance_command.py for what every risky command shares.
"""

from typing import Any

from dashboards.management.maintenance_command import MaintenanceCommand
from dashboards.models import MaintenanceAction


class Command(MaintenanceCommand):
    help = "Print the plan of repairing what Spark refuses at restart; apply it with --yes."
    action = MaintenanceAction.REPAIR

    def add_action_arguments(self, parser) -> None:
        parser.add_argument("--damage", metavar="CODE", help="Repair only this integrity finding's damage.")
        parser.add_argument("--query-id", metavar="ID", help="The query id, for a missing metadata file.")

    def parameters(self, options: dict[str, Any]) -> dict[str, Any]:
        given = {"damage": options.get("damage"), "query_id": options.get("query_id")}
        return {name: value for name, value in given.items() if value}
