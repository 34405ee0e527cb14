"""`manage.py inspect_checkpoint URL [--json]`: summarise a checkpoint straight from storage.

Touches no database: it reads the checkpoint with the format library and prints the summary.
Any local path or fsspec URL is accepted here (the shell user already has storage access); the
configured roots only restrict what the web UI registers.
"""
import json
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from workers.checkpoint import DEFAULT_COMPACT_INTERVAL, CheckpointError, CheckpointStorage, summarize_checkpoint
from workers.checkpoint.integrity import check_checkpoint
from workers.checkpoint.statesummary import read_checkpoint_state, summarize_stores


class Command(BaseCommand):
    help = "Print a summary of a Spark Structured Streaming checkpoint read directly from storage."
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser) -> None:
        parser.add_argument("url", help="Checkpoint root: a local path or an fsspec URL (s3://…, memory://…).")
        parser.add_argument("--json", action="store_true", help="Print the machine-readable JSON document.")
        parser.add_argument(
            "--sink-log",
            metavar="URL",
            help="A file sink's output directory (or its _spark_metadata log) to include in metadata_logs.",
        )
        parser.add_argument(
            "--compact-interval",
            type=int,
            default=DEFAULT_COMPACT_INTERVAL,
            metavar="N",
            help="The query's configured fileSink/fileSource.log.compactInterval, used until a log has a .compact file "
            f"(Spark does not write it into the checkpoint; default {DEFAULT_COMPACT_INTERVAL}).",
        )

    def handle(
        self, *args, url: str, json: bool = False, sink_log: str | None = None,
        compact_interval: int = DEFAULT_COMPACT_INTERVAL, **options,
    ) -> None:
        if compact_interval < 1:
            raise CommandError("--compact-interval must be at least 1")
        try:
            storage = CheckpointStorage(url)
            sink_storage = None if sink_log is None else CheckpointStorage(sink_log)
            summary = summarize_checkpoint(storage, sink_log=sink_storage, default_compact_interval=compact_interval).as_json()
            summary["state"] = [store.as_json() for store in summarize_stores(read_checkpoint_state(storage))]
            findings = check_checkpoint(storage, sink_log=sink_storage, default_compact_interval=compact_interval)
            summary["findings"] = [asdict(finding) for finding in findings]
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
    lines += [_log_line(log) for log in summary["metadata_logs"]]
    lines += [_state_line(store) for store in summary["state"]]
    lines += [
        f"{finding['severity']}:".ljust(13) + f"{finding['path']}: {finding['message']} [{finding['code']}]"
        for finding in summary["findings"]
    ]
    lines += [f"error:       {error['path']}: {error['error']}" for error in summary["errors"]]
    return "\n".join(lines)


def _log_line(log: dict) -> str:
    compactions = "[" + ", ".join(map(str, log["compact_batches"])) + "]"
    return (
        f"{log['kind']} log:".ljust(13) + f"{log['path']}: latest batch {log['latest_batch']}, interval {log['compact_interval']}, "
        f"compactions {compactions}, {log['live_entries']} live entries, "
        f"latest compact file {log['latest_compact_bytes']} bytes"
    )


def _state_line(store: dict) -> str:
    rows = "rows unknown" if store["rows"] is None else f"{store['rows']} rows"
    chain = "?" if store["max_delta_chain"] is None else store["max_delta_chain"]
    return (
        "state:".ljust(13) + f"operator {store['operator']} store {store['store']} ({store['provider']}): "
        f"{store['partitions']} partitions, version {store['latest_version']}, {rows}, "
        f"{store['bytes_on_disk']} bytes, longest delta chain {chain}"
    )
