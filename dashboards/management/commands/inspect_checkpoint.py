"""`manage.py inspect_checkpoint URL [--json] [--via SERVER]`: summarise a checkpoint straight from storage.

Touches no database: it reads the checkpoint with the format library and prints the summary.
Any local path or fsspec URL is accepted here (the shell user already has storage access); the
configured roots only restrict what the web UI registers. A path that holds no checkpoint (missing,
a file, a folder without Spark's entries) or a --sink-log that holds no file sink log exits with
status 1 and the reason; a query that has not run a batch yet is summarised with a warning. With
``--via`` it prints the batches as a ckptweb server has them, or as storage has them when that
server is unreachable or behind (workers.checkpoint.client), and says which and why.
"""

import json
import os
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError

from workers.checkpoint.client import CheckpointView, CheckpointViewClient
from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.metadatalog import DEFAULT_COMPACT_INTERVAL
from workers.checkpoint.rootkinds import classify_checkpoint_root, classify_sink_output
from workers.checkpoint.statesummary import read_checkpoint_state, summarize_stores
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage
from workers.checkpoint.summary import summarize_checkpoint

API_TOKEN_VARIABLE = "CKPTWEB_API_TOKEN"


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
        parser.add_argument(
            "--via",
            metavar="SERVER",
            help="Base URL of a ckptweb server (https://ckptweb.example): "
            "print its view of the batches, or storage's when "
            "it is unreachable or behind.",
        )
        parser.add_argument(
            "--token", help=f"API token for --via (default: the {API_TOKEN_VARIABLE} environment variable)."
        )

    def handle(
        self,
        *args,
        url: str,
        json: bool = False,
        sink_log: str | None = None,
        compact_interval: int = DEFAULT_COMPACT_INTERVAL,
        via: str | None = None,
        token: str | None = None,
        **options,
    ) -> None:
        if via is not None:
            self.stdout.write(_inspect_via(url, via, token or os.environ.get(API_TOKEN_VARIABLE, ""), as_json=json))
            return
        if compact_interval < 1:
            raise CommandError("--compact-interval must be at least 1")
        try:
            storage, sink_storage = self._open_checked(url, sink_log)
            summary = _read_summary(storage, sink_storage, compact_interval)
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
        if json:
            self.stdout.write(_dumps(summary))
        else:
            self.stdout.write(_text(summary))

    def _open_checked(self, url: str, sink_log: str | None) -> tuple[CheckpointStorage, CheckpointStorage | None]:
        """Open the checkpoint and the sink log, refusing paths that hold neither (CheckpointError)."""
        storage = CheckpointStorage(url)
        root = classify_checkpoint_root(storage)
        if root.refusal is not None:
            raise root.refusal
        sink_storage = None if sink_log is None else CheckpointStorage(sink_log)
        sink = None if sink_storage is None else classify_sink_output(sink_storage)
        if sink is not None and sink.refusal is not None:
            raise sink.refusal
        if root.warning is not None:
            self.stderr.write(f"warning: {root.warning}")
        return storage, sink_storage


def _read_summary(storage: CheckpointStorage, sink_storage: CheckpointStorage | None, compact_interval: int) -> dict:
    """The checkpoint's summary as JSON, with its state stores and the integrity check's findings."""
    summary = summarize_checkpoint(storage, sink_log=sink_storage, default_compact_interval=compact_interval).as_json()
    summary["state"] = [store.as_json() for store in summarize_stores(read_checkpoint_state(storage))]
    findings = check_checkpoint(storage, sink_log=sink_storage, default_compact_interval=compact_interval)
    summary["findings"] = [asdict(finding) for finding in findings]
    return summary


def _inspect_via(url: str, server: str, token: str, *, as_json: bool) -> str:
    if not token:
        raise CommandError(f"--via needs an API token: give --token or set {API_TOKEN_VARIABLE}")
    try:
        view = CheckpointViewClient(server, token).read_view(url)
    except CheckpointError as exc:
        raise CommandError(str(exc)) from None
    return _dumps(asdict(view)) if as_json else _view_text(view)


def _view_text(view: CheckpointView) -> str:
    origin = (
        f"server ({view.name}, signature {view.signature})" if view.source == "server" else f"storage: {view.reason}"
    )
    uncommitted = [str(batch.batch_id) for batch in view.batches if not batch.is_committed]
    lines = [
        f"source:      {origin}",
        f"query id:    {view.query_id or '(unknown)'}",
        f"batches:     {len(view.batches)}, latest {view.latest_batch_id}, "
        f"latest committed {view.latest_committed_batch_id}",
        f"uncommitted: {', '.join(uncommitted) or 'none'}",
    ]
    lines += [
        f"batch {batch.batch_id}:".ljust(13)
        + f"timestamp {batch.timestamp_ms} ms, watermark {batch.watermark_ms} ms, "
        + ("committed" if batch.is_committed else "not committed")
        for batch in view.batches
    ]
    return "\n".join(lines)


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
    lines += [line for store in summary["state"] for line in (_state_line(store), *_variable_lines(store))]
    lines += [
        f"{finding['severity']}:".ljust(13) + f"{finding['path']}: {finding['message']} [{finding['code']}]"
        for finding in summary["findings"]
    ]
    lines += [f"error:       {error['path']}: {error['error']}" for error in summary["errors"]]
    return "\n".join(lines)


def _log_line(log: dict) -> str:
    compactions = "[" + ", ".join(map(str, log["compact_batches"])) + "]"
    return (
        f"{log['kind']} log:".ljust(13)
        + f"{log['path']}: latest batch {log['latest_batch']}, interval {log['compact_interval']}, "
        f"compactions {compactions}, {log['live_entries']} live entries, "
        f"latest compact file {log['latest_compact_bytes']} bytes"
    )


def _state_line(store: dict) -> str:
    rows = "rows unknown" if store["rows"] is None else f"{store['rows']} rows"
    chain = "?" if store["max_delta_chain"] is None else store["max_delta_chain"]
    return (
        "state:".ljust(13) + f"operator {store['operator']} store {store['store']} ({store['provider']}): "
        f"{store['partitions']} partitions, version {store['latest_version']}, {rows}, "
        f"{store['bytes_on_disk']} bytes, longest delta chain {chain}" + _uncommitted_text(store)
    )


def _variable_lines(store: dict) -> list[str]:
    """One line per state variable of a store with column families (transformWithState)."""
    return [
        "variable:".ljust(13) + f"operator {store['operator']} store {store['store']}: {v['name']} ({v['kind']}), "
        f"{v['rows']} rows"
        + (f", {v['values']} elements" if v["values"] != v["rows"] else "")
        + f", {v['bytes']} bytes at version {'/'.join(map(str, v['versions'])) or '?'}"
        for v in store.get("variables") or ()
    ]


def _uncommitted_text(store: dict) -> str:
    versions = store.get("uncommitted_versions") or []
    if not versions:
        return ""
    named = ", ".join(str(version) for version in versions)
    return f"; uncommitted version{'s' if len(versions) > 1 else ''} {named} (no commit: a restart rewrites it)"
