"""`manage.py register_checkpoint NAME URL`: register (or update) a checkpoint from a script.

The same form as the web page validates it (a path that holds no checkpoint, or a --sink-log that
holds no file sink log, is refused with the reason and exit status 1), and the same audit entries
record it, refused or accepted, under the name of the shell user.
"""

from django.core.management.base import BaseCommand, CommandError

from dashboards.management.command_line import command_line_actor
from dashboards.models import Checkpoint
from dashboards.registry.forms import CheckpointForm
from dashboards.registry.registrations import audit_refusal, refusal_reasons, save_registration


class Command(BaseCommand):
    help = "Register a checkpoint for syncing, or update the one with the same name."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("url")
        parser.add_argument("--interval", type=int, default=None, help="Sync interval in seconds.")
        parser.add_argument(
            "--sink-log",
            default="",
            help="Output directory of the query's file sink, or its _spark_metadata directory.",
        )
        parser.add_argument(
            "--compact-interval", type=int, default=None, help="The query's fileSink/fileSource.log.compactInterval."
        )

    def handle(
        self,
        *args,
        name: str,
        url: str,
        interval: int | None,
        sink_log: str = "",
        compact_interval: int | None = None,
        **options,
    ) -> None:
        instance = Checkpoint.objects.filter(name=name).first()
        data = {
            "name": name,
            "url": url,
            "sink_log_url": sink_log,
            "file_log_compact_interval": compact_interval,
            "is_enabled": True,
        }
        if compact_interval is None and instance is not None:
            data["file_log_compact_interval"] = instance.file_log_compact_interval
        data["sync_interval_seconds"] = interval or (
            instance.sync_interval_seconds if instance else Checkpoint().sync_interval_seconds
        )
        form = CheckpointForm(data, instance=instance)
        actor_name = command_line_actor("register_checkpoint")
        if not form.is_valid():
            audit_refusal(form, actor_name=actor_name)
            raise CommandError(refusal_reasons(form))
        checkpoint = save_registration(form, actor_name=actor_name)
        for warning in form.warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(f"registered {checkpoint.name} -> {checkpoint.url} (id {checkpoint.pk})")
