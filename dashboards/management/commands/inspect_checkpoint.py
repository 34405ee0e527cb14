"""`manage.py inspect_checkpoint URL [--json]`: summarise a checkpoint straight from storage.

Touches no database: it reads the checkpoint with the format library and prints the summary.
Any local path or fsspec URL is accepted here (the shell user already has storage access); the
configured roots only restrict what the web UI registers.
"""
import json

from django.core.management.base import BaseCommand, CommandError

from workers.checkpoint import CheckpointError, CheckpointStorage, summarize_checkpoint


class Command(BaseCommand):
    help = "Print a summary of a Spark Structured Streaming checkpoint read directly from storage."
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser) -> None:
        parser.add_argument("url", help="Checkpoint root: a local path or an fsspec URL (s3://…, memory://…).")
        parser.add_argument("--json", action="store_true", help="Print the machine-readable JSON document.")

    def handle(self, *args, url: str, json: bool = False, **options) -> None:
        try:
            summary = summarize_checkpoint(CheckpointStorage(url)).as_json()
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
        if json:
            self.stdout.write(_dumps(summary))
        else:
            self.stdout.write(_text(summary))


def _dumps(summary: dict) -> str:
    return json.dumps(summary, indent=2)


def _text(summary: dict) -> str:
    offsets, commits = summary["offsets"], summary["commits"]
    lines = [
        f"query id:    {summary['query_id'] or '(no metadata file)'}",
        f"offsets:     {offsets['count']} files, batches {offsets['first']}..{offsets['latest']}",
        f"commits:     {commits['count']} files, batches {commits['first']}..{commits['latest']}",
        f"uncommitted: {', '.join(map(str, summary['uncommitted'])) or 'none'}",
    ]
    lines += [f"error:       {error['path']}: {error['error']}" for error in summary["errors"]]
    return "\n".join(lines)
