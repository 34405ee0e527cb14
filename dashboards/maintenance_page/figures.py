"""What a maintenance request would do, judged from the figures the syncs stored: defaults and a preview.

The request form starts from the query's own settings, not from Spark's defaults alone (with
those, a query run with ``minBatchesToRetain`` 10 always got "nothing to do"), and shows one
line per action of what the plan would do. Everything here is computed from stored rows,
gathered by ``Checkpoint.objects.maintenance_figures``: the web process reads no storage. The
worker's plan, made from storage, remains what is confirmed; the arithmetic and the "nothing to
do" sentences are the planners' own (``workers.checkpoint.maintenance``), so the two agree.

Pure: no request, no ORM.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workers.checkpoint.compactible import expiry_threshold, latest_compaction_batch_id
from workers.checkpoint.maintenance.cleanup import DEFAULT_MIN_VERSIONS_TO_RETAIN, explain_nothing_to_clean
from workers.checkpoint.maintenance.compactionexpiry import explain_nothing_to_expire
from workers.checkpoint.maintenance.plan import batch_span
from workers.checkpoint.maintenance.purge import explain_nothing_to_purge, purge_limits
from workers.checkpoint.maintenance.snapshot import DEFAULT_MIN_CHAIN, explain_no_snapshot

MIN_BATCHES_TO_RETAIN_CONF = "spark.sql.streaming.minBatchesToRetain"
MIN_DELTAS_FOR_SNAPSHOT_CONF = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
# The parameters that stand for the query's minBatchesToRetain, one per action that keeps batches.
RETAIN_PARAMETERS = ("keep_batches", "min_versions_to_retain", "min_batches_to_retain")


@dataclass(frozen=True, slots=True)
class StoreFigures:
    """One state store directory as the last full pass found it."""

    path: str
    provider: str
    latest_version: int | None
    delta_chain: int | None  # deltas (changelogs) replayed after the last snapshot


@dataclass(frozen=True, slots=True)
class LogFigures:
    """One compactible log as the last full pass read it."""

    choice: str  # how the request form names it: "sources/<i>" or "sink"
    path: str
    compact_interval: int  # the effective one, derived from its .compact files
    latest_batch_id: int | None
    oldest_batch_id: int | None
    compact_batch_ids: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class MaintenanceFigures:
    """What the database knows of a checkpoint that a maintenance request depends on."""

    conf: Mapping[str, str]  # the SQL conf the newest batch pinned in the offset log
    oldest_batch_id: int | None  # lowest offsets/N at the last listing
    latest_batch_id: int | None
    latest_committed_batch_id: int | None
    oldest_state_version: int | None
    stores: tuple[StoreFigures, ...] = ()
    logs: tuple[LogFigures, ...] = ()


@dataclass(frozen=True, slots=True)
class Suggestion:
    """A starting value of a parameter and where it comes from, for the form's help text."""

    value: int
    source: str


@dataclass(frozen=True, slots=True)
class Preview:
    """One line of what a request would do; ``does_something`` False for "nothing to do"."""

    text: str
    does_something: bool


def suggest_parameters(figures: MaintenanceFigures) -> dict[str, Suggestion]:
    """The starting value of each numeric parameter, taken from the checkpoint where it tells."""
    retain = _batches_to_retain(figures)
    return {**{name: retain for name in RETAIN_PARAMETERS}, "min_chain": _min_deltas_for_snapshot(figures)}


def _batches_to_retain(figures: MaintenanceFigures) -> Suggestion:
    pinned = _pinned_count(figures.conf, MIN_BATCHES_TO_RETAIN_CONF)
    if pinned is not None:
        return Suggestion(pinned, f"{MIN_BATCHES_TO_RETAIN_CONF}, pinned in the offset log")
    oldest, latest = figures.oldest_batch_id, figures.latest_batch_id
    if oldest and latest is not None and latest > oldest:
        # At the start of batch b Spark purges the batches below b - minBatchesToRetain, so
        # once it has purged, the offsets it left span minBatchesToRetain batches after the oldest.
        return Suggestion(
            latest - oldest, f"Spark's own purge left batches {oldest}–{latest}: the query's minBatchesToRetain"
        )
    return Suggestion(
        DEFAULT_MIN_VERSIONS_TO_RETAIN, f"Spark's default {MIN_BATCHES_TO_RETAIN_CONF}: the checkpoint shows no other"
    )


def _min_deltas_for_snapshot(figures: MaintenanceFigures) -> Suggestion:
    pinned = _pinned_count(figures.conf, MIN_DELTAS_FOR_SNAPSHOT_CONF)
    if pinned is not None:
        return Suggestion(pinned, f"{MIN_DELTAS_FOR_SNAPSHOT_CONF}, pinned in the offset log")
    return Suggestion(DEFAULT_MIN_CHAIN, f"Spark's default {MIN_DELTAS_FOR_SNAPSHOT_CONF}: the offset log pins none")


def _pinned_count(conf: Mapping[str, str], key: str) -> int | None:
    """A positive integer the offset log pins under ``key``; None when absent or not one."""
    raw = str(conf.get(key, "")).strip()
    return int(raw) if raw.isdigit() and int(raw) >= 1 else None


def preview_request(action: str, parameters: Mapping[str, Any], figures: MaintenanceFigures) -> Preview:
    """What ``action`` with ``parameters`` (as the form cleaned them) would do, in one line."""
    if action == "purge":
        return _preview_purge(parameters["keep_batches"], figures)
    if action == "snapshot":
        return _preview_snapshot(parameters["min_chain"], figures)
    if action == "cleanup":
        return _preview_cleanup(parameters["min_versions_to_retain"], parameters["keep_offsets_range"], figures)
    if action == "compact":
        return _preview_compact(parameters.get("log") or "", parameters["min_batches_to_retain"], figures)
    if action == "rewind":
        return _preview_rewind(parameters["to_batch"], figures)
    if action == "skip":
        return _preview_skip(parameters, figures)
    if action == "repair":
        return Preview(_REPAIR_PREVIEW.get(bool(parameters.get("damage")), ""), True)
    raise ValueError(f"unknown maintenance action {action!r}")


def _batch_range(figures: MaintenanceFigures) -> tuple[int | None, int | None, int | None]:
    """The latest committed, latest and oldest batch ids, the bounds purge and rewind work within."""
    return figures.latest_committed_batch_id, figures.latest_batch_id, figures.oldest_batch_id


def _preview_purge(keep_batches: int, figures: MaintenanceFigures) -> Preview:
    committed, latest, oldest = _batch_range(figures)
    if committed is None or latest is None:
        return Preview("nothing to purge: no batch is committed yet", False)
    if oldest is None:
        return Preview("no listing of offsets/ yet: the plan will say what goes", True)
    return _purge_within(committed, latest, oldest, keep_batches=keep_batches, figures=figures)


def _purge_within(
    committed: int, latest: int, oldest: int, *, keep_batches: int, figures: MaintenanceFigures
) -> Preview:
    """The purge the tightest of the planner's limits allows between ``oldest`` and ``latest``."""
    limits = purge_limits(committed, latest, keep_batches=keep_batches, oldest_state=figures.oldest_state_version)
    binding = min(limits, key=lambda limit: limit.threshold)
    if binding.threshold <= oldest:
        text = explain_nothing_to_purge(oldest, latest, limits, keep_batches=keep_batches, latest_committed=committed)
        return Preview(text, False)
    return _purge_below(binding, oldest=oldest, latest=latest)


def _purge_below(binding, *, oldest: int, latest: int) -> Preview:
    """The purge of the batches below the binding limit's threshold, and the reason it stops there."""
    return Preview(
        f"purge offsets and commits of {batch_span(oldest, binding.threshold - 1)}, "
        f"keep {batch_span(binding.threshold, latest)} "
        f"({binding.reason})",
        True,
    )


def _preview_snapshot(min_chain: int, figures: MaintenanceFigures) -> Preview:
    hdfs = [store for store in figures.stores if store.provider == "hdfs" and store.latest_version is not None]
    if not figures.stores:
        return Preview("nothing to do: the last full pass found no state store", False)
    if not hdfs:
        return Preview(
            "nothing to do: no HDFS-backed store (RocksDB's snapshots are written by Spark's RocksDB provider)", False
        )
    chains = sorted(((store.delta_chain or 0), store.path, store.latest_version) for store in hdfs)
    due = [chain for chain, _, _ in chains if chain > min_chain]
    if not due:
        return Preview(explain_no_snapshot(*chains[-1], min_chain=min_chain), False)
    return _snapshots_due(due, stores=len(hdfs), min_chain=min_chain)


def _snapshots_due(due: list[int], *, stores: int, min_chain: int) -> Preview:
    """Snapshots in the stores whose delta chains (``due``) are longer than ``min_chain``, of ``stores``."""
    lengths = f"{min(due)}" if min(due) == max(due) else f"{min(due)} to {max(due)}"
    chains_are = "delta chain of {} deltas is" if len(due) == 1 else "delta chains of {} deltas are"
    return Preview(
        f"write a snapshot in {len(due)} of {stores} stores, "
        f"whose {chains_are.format(lengths)} longer than the {min_chain} allowed",
        True,
    )


def _preview_cleanup(min_versions_to_retain: int, keep_offsets_range: bool, figures: MaintenanceFigures) -> Preview:
    committed = figures.latest_committed_batch_id
    # batch N writes state version N + 1
    latest = None if committed is None else committed + 1
    oldest = figures.oldest_state_version
    protect_from = figures.oldest_batch_id if keep_offsets_range else None
    earliest = _earliest_kept_version(latest, min_versions_to_retain, protect_from=protect_from)
    if latest is None or oldest is None or earliest is None or earliest <= oldest:
        text = explain_nothing_to_clean(
            oldest=oldest, latest=latest, retain=min_versions_to_retain, protect_from=protect_from
        )
        return Preview(text, False)
    return Preview(
        f"delete the state files of versions {oldest}–{earliest - 1} that no version from {earliest} to {latest} loads "
        "(a delta chain a retained version replays stays)",
        True,
    )


def _earliest_kept_version(latest: int | None, retain: int, *, protect_from: int | None) -> int | None:
    """The oldest state version cleanup keeps: ``retain`` below the latest, or older to protect offsets."""
    earliest = None if latest is None else latest - retain
    if protect_from is not None and earliest is not None:
        earliest = min(earliest, protect_from)
    return earliest


def _preview_compact(choice: str, min_batches_to_retain: int, figures: MaintenanceFigures) -> Preview:
    log = next((log for log in figures.logs if log.choice == choice), None)
    if not figures.logs:
        return Preview(
            "nothing to do: no compactible log (the query reads no file source, "
            "and no file sink is registered or read yet)",
            False,
        )
    if log is None:
        return Preview("nothing to do: the last full pass found no such compactible log", False)
    if log.latest_batch_id is None:
        return Preview(f"nothing to do: {log.path} has no batch file", False)
    compact = _compaction_part(log)
    expire = _expiry_part(log, min_batches_to_retain)
    return Preview(f"{compact.text}; {expire.text}", compact.does_something or expire.does_something)


def _compaction_part(log: LogFigures) -> Preview:
    target = latest_compaction_batch_id(log.latest_batch_id, log.compact_interval)
    if target is None:
        return Preview(
            f"nothing to compact: {log.path} has no compaction batch yet "
            f"(the first is batch {log.compact_interval - 1})",
            False,
        )
    if target in log.compact_batch_ids:
        return Preview(f"nothing to compact: {target}.compact is present", False)
    return Preview(f"write {target}.compact of {log.path}, which is missing", True)


def _expiry_part(log: LogFigures, min_batches_to_retain: int) -> Preview:
    latest, oldest, interval = log.latest_batch_id, log.oldest_batch_id, log.compact_interval
    threshold = expiry_threshold(latest, interval=interval, min_batches_to_retain=min_batches_to_retain)
    if threshold is None or oldest is None or oldest >= threshold:
        text = explain_nothing_to_expire(
            log.path, latest, oldest=oldest, interval=interval, min_batches_to_retain=min_batches_to_retain
        )
        return Preview(text, False)
    return Preview(f"expire {batch_span(oldest, threshold - 1)} of {log.path} (those past the cleanup delay)", True)


_REPAIR_PREVIEW = {
    True: "repair that damage if the integrity check still finds it; the plan names each file it writes or deletes",
    False: "repair every damage the integrity check finds that a repair can fix; the plan names each file",
}


def _preview_rewind(to_batch: int | None, figures: MaintenanceFigures) -> Preview:
    committed, latest, oldest = _batch_range(figures)
    if to_batch is None or committed is None or latest is None:
        return Preview("nothing to rewind: no batch is committed yet", False)
    if to_batch > committed:
        return Preview(f"cannot rewind to batch {to_batch}: the latest committed batch is {committed}", False)
    if oldest is not None and to_batch < oldest:
        return Preview(f"cannot rewind to batch {to_batch}: the offset log starts at batch {oldest}", False)
    if to_batch == latest:
        return Preview(f"nothing to rewind: batch {to_batch} is the latest", False)
    return Preview(
        f"remove {batch_span(to_batch + 1, latest)} from the logs and the state written after them (a backup is kept); "
        f"the next run starts at batch {to_batch + 1}",
        True,
    )


def _preview_skip(parameters: Mapping[str, Any], figures: MaintenanceFigures) -> Preview:
    batch = parameters.get("batch")
    if batch is not None:
        return Preview(f"mark batch {batch} done without running it; the next run starts at batch {batch + 1}", True)
    if parameters.get("files") or parameters.get("partition"):
        return _preview_skip_in_source(parameters)
    latest, committed = figures.latest_batch_id, figures.latest_committed_batch_id
    if latest is not None and latest != committed:
        return Preview(f"give a batch (batch {latest} is not committed) or a source to skip part of", False)
    return Preview("give a batch, or a source with a partition and offset or with files", False)


def _preview_skip_in_source(parameters: Mapping[str, Any]) -> Preview:
    """Skipping part of one source: some of its files, or a partition up to an offset."""
    if parameters.get("files"):
        return Preview(f"skip {len(parameters['files'])} file(s) of source {parameters['source']}", True)
    return Preview(
        f"start {parameters['partition']} of source {parameters['source']} at offset {parameters['to_offset']}",
        True,
    )
