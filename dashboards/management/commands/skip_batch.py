"""`manage.py skip_batch PATH_OR_URL --batch N` (skip (a)), or `--source I --partition TOPIC-P --to-offset O`
or `--source I --file PATH ...` (skip (b)): plan (and with --yes apply) a skip.

The shapes are the request form's (``skip_parameters``); see
dashboards/management/maintenance_command.py for what every risky command shares.
"""

from typing import Any

from django.core.management.base import CommandError

from dashboards.maintenance_page.forms import skip_parameters
from dashboards.management.maintenance_command import MaintenanceCommand
from dashboards.models import MaintenanceAction


class Command(MaintenanceCommand):
    help = "Print the plan of skipping an uncommitted batch, or part of a source; apply it with --yes."
    action = MaintenanceAction.SKIP

    def add_action_arguments(self, parser) -> None:
        parser.add_argument("--batch", type=int, metavar="N", help="Skip (a): the uncommitted batch to mark done.")
        parser.add_argument("--source", type=int, metavar="I", help="Skip (b): the source's index in offsets/N.")
        parser.add_argument("--partition", metavar="TOPIC-P", help="Skip (b), Kafka: the topic-partition to move.")
        parser.add_argument("--to-offset", type=int, metavar="O", help="Skip (b), Kafka: its new start offset.")
        parser.add_argument(
            "--file", action="append", dest="files", metavar="PATH", help="Skip (b), file source: a file (repeatable)."
        )

    def parameters(self, options: dict[str, Any]) -> dict[str, Any]:
        errors: list[str] = []
        values = {**options, "files": "\n".join(options.get("files") or [])}
        parameters = skip_parameters(values, add_error=lambda _field, why: errors.append(why))
        if errors:
            raise CommandError(" ".join(errors))
        return parameters
