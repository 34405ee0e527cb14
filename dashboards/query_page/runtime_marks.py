"""What happened along a query's history, as marks for the Runtime charts.

Each kind is read with a few indexed queries, and at most MAX_MARKS_PER_KIND of it (the newest):
* a query restart: the first batch a new run (QueryRun, Spark's runId) reported, one index seek
  per run from the previous run's last batch;
* a change of the SQL conf Spark pins in the offset log, between the batch before a restart and
  the last batch of the new run (Spark restores the pinned values on restart, so a change means
  a new Spark version or an edited log);
* a compaction of a file sink log (its batch ids are the query's) or of a file source log (the
  batch whose offset reached the compaction's logOffset, read from the offsets of a range of up
  to MAX_BATCHES_FOR_SOURCE_COMPACTIONS batches); past MAX_MARKS_PER_KIND of a log, a mark
  stands for a run of consecutive compactions and counts them;
* a maintenance run that started;
* the newest state snapshot of each store partition, from the last full pass (version V is the
  state after batch V - 1);
* an open integrity finding, at the batch its file names (offsets/N, commits/N) or else at the
  moment it was first seen.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Max

from dashboards.models import BatchProgress, Checkpoint, MetadataLog, QueryRun
from dashboards.query_page.mark_lane import RuntimeMark
from workers.checkpoint.compactible import is_compaction_batch
from workers.checkpoint.layout import COMMITS_DIR, OFFSETS_DIR, parse_batch_id

MAX_MARKS_PER_KIND = 100
MAX_BATCHES_FOR_SOURCE_COMPACTIONS = 5_000
CONF_CHANGES_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Window:
    """The batch ids and times the charts show; an open end takes every event past it."""

    first_batch: int
    last_batch: int
    first_ms: int | None = None  # None: the range starts with the history
    last_ms: int | None = None  # None: the range runs to now

    def has_time(self, moment: datetime) -> bool:
        ms = _ms(moment)
        return (self.first_ms is None or ms >= self.first_ms) and (self.last_ms is None or ms <= self.last_ms)

    def has_batch(self, batch_id: int) -> bool:
        return self.first_batch <= batch_id <= self.last_batch


@dataclass(frozen=True, slots=True)
class RunStart:
    run_id: str
    batch_id: int
    time_ms: int
    last_batch_id: int


@dataclass(frozen=True, slots=True, order=True)
class BatchEvent:
    """An event known by its batch; its time is the batch's."""

    batch_id: int
    kind: str
    text: str
    link: str | None = None
    count: int = 1  # above 1: that many events, from batch_id to last_batch_id
    last_batch_id: int | None = None


def runtime_marks(checkpoint: Checkpoint, window: Window) -> list[RuntimeMark]:
    """Every kind of mark within ``window``, each kind capped to its newest MAX_MARKS_PER_KIND."""
    starts = run_starts(checkpoint, window)
    marks = [_restart_mark(start) for start in starts] + conf_change_marks(checkpoint, starts)
    finding_marks, finding_events = _finding_marks(checkpoint, window)
    events = [*compaction_events(checkpoint, window), *snapshot_events(checkpoint, window), *finding_events]
    times = batch_times(checkpoint, [b for e in events for b in (e.batch_id, e.last_batch_id) if b is not None])
    marks += [_event_mark(event, times) for event in events if event.batch_id in times]
    return marks + finding_marks + maintenance_marks(checkpoint, window)


def _event_mark(event: BatchEvent, times: Mapping[int, int]) -> RuntimeMark:
    last_time = None if event.last_batch_id is None else times.get(event.last_batch_id)
    return RuntimeMark(
        event.kind,
        times[event.batch_id],
        event.text,
        event.batch_id,
        event.link,
        count=event.count,
        last_time_ms=last_time,
        last_batch_id=event.last_batch_id,
    )


def run_starts(checkpoint: Checkpoint, window: Window) -> list[RunStart]:
    """The newest runs whose first reported batch lies in the window, each after an earlier run of the query.

    Runs follow one another: a run that starts in the window ends at or after its first batch and
    follows a run that ended before the window's last batch.
    """
    chain = _run_chain(checkpoint, window)
    starts = []
    for previous, run in zip(chain, chain[1:], strict=False):
        first = _first_batch_of(checkpoint, run["pk"], from_batch=previous["last_batch_id"])
        if first is not None and window.has_batch(first["batch_id"]):
            starts.append(
                RunStart(str(run["run_id"]), first["batch_id"], _ms(first["timestamp"]), run["last_batch_id"])
            )
    return starts


def _run_chain(checkpoint: Checkpoint, window: Window) -> list[dict]:
    """The runs that may start in the window, oldest first, preceded by the last run that ended before it.

    At most MAX_MARKS_PER_KIND + 1 runs (the run before only when there is room), none ending
    after the first run that ends at or after the window's last batch.
    """
    runs = QueryRun.objects.filter(query_id=checkpoint.query_id, last_batch_id__isnull=False)
    fields = ("pk", "run_id", "last_batch_id")
    ending_after = (
        runs.filter(last_batch_id__gte=window.last_batch)
        .order_by("last_batch_id", "pk")
        .values_list("last_batch_id", flat=True)
        .first()
    )
    inside = runs.filter(last_batch_id__gte=window.first_batch)
    if ending_after is not None:
        inside = inside.filter(last_batch_id__lte=ending_after)
    chain = list(inside.order_by("-last_batch_id", "-pk").values(*fields)[: MAX_MARKS_PER_KIND + 1])[::-1]
    before = runs.filter(last_batch_id__lt=window.first_batch).order_by("-last_batch_id", "-pk").values(*fields).first()
    if before is not None and len(chain) <= MAX_MARKS_PER_KIND:
        chain.insert(0, before)
    return chain


def _first_batch_of(checkpoint: Checkpoint, run_pk: int, *, from_batch: int) -> dict | None:
    """The lowest batch a run reported, looked for from the previous run's last batch (a restart may
    run that batch again) along the (query, batch id) index."""
    progress = BatchProgress.objects.filter(query_id=checkpoint.query_id, run_id=run_pk, batch_id__gte=from_batch)
    return progress.order_by("batch_id").values("batch_id", "timestamp").first()


def _restart_mark(start: RunStart) -> RuntimeMark:
    return RuntimeMark(
        "restart",
        start.time_ms,
        f"query restarted: run {start.run_id[:8]}… from batch {start.batch_id}",
        start.batch_id,
    )


def conf_change_marks(checkpoint: Checkpoint, starts: Iterable[RunStart]) -> list[RuntimeMark]:
    """A mark at each restart whose run pinned another SQL conf than the batch before it (one query)."""
    pairs = [(start, start.batch_id - 1, start.last_batch_id) for start in starts]
    wanted = {batch for _, before, after in pairs for batch in (before, after)}
    confs = dict(checkpoint.batches.filter(batch_id__in=wanted).values_list("batch_id", "conf"))
    marks = []
    for start, before, after in pairs:
        if before in confs and after in confs and confs[before] != confs[after]:
            text = "pinned SQL conf changed: " + describe_conf_change(confs[before], confs[after])
            marks.append(RuntimeMark("conf", start.time_ms, text, start.batch_id))
    return marks


def describe_conf_change(old: Mapping[str, str], new: Mapping[str, str]) -> str:
    """``key old → new`` for the first few keys that differ (unset where absent), and how many more."""
    changed = sorted(key for key in old.keys() | new.keys() if old.get(key) != new.get(key))
    parts = [f"{key} {old.get(key, '(unset)')} → {new.get(key, '(unset)')}" for key in changed[:CONF_CHANGES_SHOWN]]
    more = len(changed) - CONF_CHANGES_SHOWN
    return "; ".join(parts) + (f"; {more} more" if more > 0 else "")


def compaction_events(checkpoint: Checkpoint, window: Window) -> list[BatchEvent]:
    """Each log compaction in the window; past MAX_MARKS_PER_KIND of a log, runs of them, counted."""
    found = []
    for log in checkpoint.metadata_logs.all():
        if log.kind == MetadataLog.Kind.SINK:
            found += _sink_compactions(log, window)
        elif window.last_batch - window.first_batch < MAX_BATCHES_FOR_SOURCE_COMPACTIONS:
            found += _source_compactions(checkpoint, log, window)
    return found


def _sink_compactions(log: MetadataLog, window: Window) -> list[BatchEvent]:
    """A file sink's batch ids are the query's: CompactibleFileStreamLog.isCompactionBatch,
    (batch + 1) % interval == 0."""
    interval = log.compact_interval
    first = window.first_batch + (interval - 1 - window.first_batch) % interval
    batches = range(first, window.last_batch + 1, interval)
    return _compactions(
        batches, lambda batch: f"file sink log compaction: _spark_metadata/{batch}.compact", "file sink log compactions"
    )


def _compactions(batches: Sequence[int], describe: Callable[[int], str], plural: str) -> list[BatchEvent]:
    """An event per compaction batch, or past MAX_MARKS_PER_KIND, one per run of consecutive ones
    (at most MAX_MARKS_PER_KIND runs), counted: never a silent gap."""
    if len(batches) <= MAX_MARKS_PER_KIND:
        return [BatchEvent(batch, "compaction", describe(batch)) for batch in batches]
    size = -(-len(batches) // MAX_MARKS_PER_KIND)
    runs = [batches[start : start + size] for start in range(0, len(batches), size)]
    return [
        BatchEvent(
            run[0],
            "compaction",
            f"{len(run):,} {plural}, batches {run[0]} to {run[-1]}",
            count=len(run),
            last_batch_id=run[-1],
        )
        for run in runs
    ]


def _source_compactions(checkpoint: Checkpoint, log: MetadataLog, window: Window) -> list[BatchEvent]:
    """The batches whose file-source offset first reached a compaction batch of the source's log.

    The source writes sources/<i>/L while planning the query batch whose end offset is
    {"logOffset": L} (FileStreamSource.fetchMaxOffset); later batches without new files keep L.
    """
    index = int(log.path.rpartition("/")[2])
    offsets = checkpoint.batches.filter(batch_id__gte=window.first_batch - 1, batch_id__lte=window.last_batch).order_by(
        "batch_id"
    )
    found, previous = {}, None
    for batch_id, sources in offsets.values_list("batch_id", "sources"):
        offset = _log_offset(sources, index)
        if (
            offset is not None
            and offset != previous
            and batch_id >= window.first_batch
            and is_compaction_batch(offset, log.compact_interval)
        ):
            found[batch_id] = offset
        previous = offset
    return _compactions(
        list(found),
        lambda batch: f"file source {index} log compaction: {log.path}/{found[batch]}.compact",
        f"file source {index} log compactions",
    )


def _log_offset(sources: list, index: int) -> int | None:
    """The logOffset of a FileStreamSourceOffset as the offset log keeps it (JSON text), or None."""
    if index >= len(sources) or not isinstance(sources[index], str):
        return None
    try:
        offset = json.loads(sources[index])
    except ValueError:
        return None
    value = offset.get("logOffset") if isinstance(offset, dict) else None
    return value if isinstance(value, int) else None


def snapshot_events(checkpoint: Checkpoint, window: Window) -> list[BatchEvent]:
    """Each state version that is some store partition's newest snapshot (version V: after batch V - 1)."""
    total = checkpoint.state_partitions.count()
    versions = (
        checkpoint.state_partitions.filter(snapshot_version__isnull=False)
        .values("snapshot_version")
        .annotate(stores=Count("pk"))
        .order_by("snapshot_version")
    )
    return [
        BatchEvent(
            row["snapshot_version"] - 1,
            "snapshot",
            f"newest state snapshot of {row['stores']} of {total} store partitions: version {row['snapshot_version']}",
        )
        for row in versions
        if window.has_batch(row["snapshot_version"] - 1)
    ][-MAX_MARKS_PER_KIND:]


def _finding_marks(checkpoint: Checkpoint, window: Window) -> tuple[list[RuntimeMark], list[BatchEvent]]:
    """Open findings: marks at the moment first seen, or events at the batch their file names."""
    link = checkpoint.get_absolute_url() + "#integrity"
    at_moments, at_batches = [], []
    for finding in checkpoint.findings.open()[:MAX_MARKS_PER_KIND]:
        text = f"{finding.get_severity_display()} finding {finding.code}: {finding.path or 'checkpoint'}"
        batch = batch_of_path(finding.path)
        if batch is not None and window.has_batch(batch):
            at_batches.append(BatchEvent(batch, "finding", text, link))
        elif batch is None and window.has_time(finding.first_seen_at):
            at_moments.append(
                RuntimeMark("finding", _ms(finding.first_seen_at), text + " (first seen then)", None, link)
            )
    return at_moments, at_batches


def batch_of_path(path: str) -> int | None:
    """The batch an offsets/N or commits/N path belongs to, else None."""
    directory, _, name = path.rpartition("/")
    return parse_batch_id(name) if directory in (OFFSETS_DIR, COMMITS_DIR) else None


def maintenance_marks(checkpoint: Checkpoint, window: Window) -> list[RuntimeMark]:
    runs = checkpoint.maintenance_runs.filter(started_at__isnull=False).order_by("-started_at")
    return [
        RuntimeMark(
            "maintenance",
            _ms(run.started_at),
            f"maintenance #{run.pk}: {run.get_action_display()} ({run.get_status_display()})",
            None,
            run.get_absolute_url(),
        )
        for run in runs[:MAX_MARKS_PER_KIND]
        if window.has_time(run.started_at)
    ]


def batch_times(checkpoint: Checkpoint, batch_ids: Iterable[int]) -> dict[int, int]:
    """Start time (epoch ms) of each batch: its progress timestamp, else the offset log's batchTimestampMs."""
    wanted = set(batch_ids)
    reported = BatchProgress.objects.filter(query_id=checkpoint.query_id, batch_id__in=wanted).values_list(
        "batch_id", "timestamp"
    )
    times = {batch: _ms(moment) for batch, moment in reported}
    logged = checkpoint.batches.filter(batch_id__in=wanted - times.keys(), timestamp_ms__gt=0).values_list(
        "batch_id", "timestamp_ms"
    )
    return {**dict(logged), **times}


def marks_version(checkpoint: Checkpoint) -> tuple:
    """What moves the marks beside new progress: a full pass (logs, snapshots, findings) or a maintenance run."""
    runs = checkpoint.maintenance_runs.aggregate(started=Max("started_at"), finished=Max("finished_at"))
    return (checkpoint.last_inspected_at, runs["started"], runs["finished"])


def _ms(moment: datetime) -> int:
    return round(moment.timestamp() * 1000)
