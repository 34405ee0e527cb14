"""The edge of the integrity check: list the checkpoint once and read the files Spark reads at restart.

The only part of the check that does I/O; it never raises CheckpointError, because a file that
cannot be listed, read or parsed is itself a finding of the pure checks it hands the facts to.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from ..errors import CheckpointError
from ..fileinfo import FileInfo
from ..inventory import TreeListing, list_tree
from ..layout import COMMITS_DIR, METADATA_FILE, OFFSETS_DIR
from ..logdir import find_stream_metadata, list_batch_ids, read_commit, read_offset_seq
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, LogKind, file_source_log_dirs, read_metadata_log, sink_log_location
from ..offsets import OffsetSeq, offset_as_json
from ..stateinventory import list_state_store_dirs
from ..stateschema import find_operator_state_metadata, find_store_schema
from ..storage.checkpointstorage import CheckpointStorage
from .checks import run_checks
from .facts import CheckpointFacts, CompactibleLog, OperatorDescription, ReadOutcome
from .findings import Finding
from .state import _shuffle_partitions


def check_checkpoint(
    storage: CheckpointStorage,
    *,
    sink_log: CheckpointStorage | None = None,
    default_compact_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> list[Finding]:
    """List and read what a restart needs, and return every finding, errors first.

    ``sink_log`` is rooted at a file sink's output directory or at its ``_spark_metadata``.
    ``default_compact_interval`` is the query's configured compactInterval of file logs.
    """
    return run_checks(gather_facts(storage, sink_log=sink_log, default_compact_interval=default_compact_interval))


def gather_facts(
    storage: CheckpointStorage,
    *,
    sink_log: CheckpointStorage | None = None,
    default_compact_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> CheckpointFacts:
    """List the checkpoint once and read the files Spark reads at restart; never raises CheckpointError."""
    observed_at = time.time()
    listing = list_tree(storage)
    reads = _read_restart_files(storage, listing)
    interval = default_compact_interval
    logs = _read_source_logs(storage, listing, reads, interval)
    if sink_log is None:
        facts = CheckpointFacts(listing, reads, tuple(logs), observed_at=observed_at)
    else:
        facts = _facts_with_sink_log(listing, reads, logs, sink_log, interval, observed_at)
    return replace(facts, lone_partition_operators=_describe_lone_partition_operators(storage, facts))


def _read_source_logs(
    storage: CheckpointStorage, listing: TreeListing, reads: Iterable[ReadOutcome], interval: int
) -> list[CompactibleLog]:
    """The logs of the file sources the restart files name, each listed from ``listing``."""
    return [
        _read_compactible_log(storage, dirname, tuple(listing.list_dir(dirname)), dirname, "source", interval)
        for dirname in _file_source_logs(reads)
    ]


def _facts_with_sink_log(
    listing: TreeListing,
    reads: tuple[ReadOutcome, ...],
    logs: Sequence[CompactibleLog],
    sink_log: CheckpointStorage,
    interval: int,
    observed_at: float,
) -> CheckpointFacts:
    """The facts of the checkpoint and its file sink's log: listed once, read after the sources' ``logs``."""
    dirname, url = sink_log_location(sink_log)
    sink_listing = list_tree(sink_log, dirname)
    files = tuple(sink_listing.list_dir(dirname))
    sink = _read_compactible_log(sink_log, dirname, files, url, "sink", interval)
    return CheckpointFacts(listing, reads, (*logs, sink), sink_listing.failures, sink_listing, observed_at)


def _attempt(path: str, read: Callable[..., Any], *args: Any, **kwargs: Any) -> ReadOutcome:
    try:
        return ReadOutcome(path, value=read(*args, **kwargs))
    except CheckpointError as exc:
        return ReadOutcome(path, error=exc)


def _read_restart_files(storage: CheckpointStorage, listing: TreeListing) -> tuple[ReadOutcome, ...]:
    """Read metadata, offsets L and L-1 and the latest commit, as far as they are listed."""
    reads = []
    if any(info.name == METADATA_FILE for info in listing.list_dir()):
        reads.append(_attempt(METADATA_FILE, find_stream_metadata, storage))
    offsets = set(list_batch_ids(listing, OFFSETS_DIR))  # type: ignore[arg-type]
    for batch_id in _offsets_read_at_restart(sorted(offsets)):
        if batch_id in offsets:
            reads.append(_attempt(f"{OFFSETS_DIR}/{batch_id}", read_offset_seq, storage, batch_id))
    commits = list_batch_ids(listing, COMMITS_DIR)  # type: ignore[arg-type]
    if commits:
        reads.append(_attempt(f"{COMMITS_DIR}/{commits[-1]}", read_commit, storage, commits[-1]))
    return tuple(reads)


def _offsets_read_at_restart(offset_ids: Sequence[int]) -> list[int]:
    """The latest batch and the one before it (which Spark requires), newest first."""
    if not offset_ids:
        return []
    latest = offset_ids[-1]
    return [latest, latest - 1] if latest > 0 else [latest]


def _file_source_logs(reads: Iterable[ReadOutcome]) -> list[str]:
    """The ``sources/<i>`` of file sources, told by the newest offsets file that could be read."""
    for read in reads:
        if isinstance(read.value, OffsetSeq):
            return file_source_log_dirs([offset_as_json(offset) for offset in read.value.offsets])
    return []


def _read_compactible_log(
    storage: CheckpointStorage, dirname: str, files: tuple[FileInfo, ...], path: str, kind: LogKind, interval: int
) -> CompactibleLog:
    outcome = _attempt(path, read_metadata_log, storage, dirname, kind=kind, default_interval=interval)
    return CompactibleLog(path, kind, files, outcome, interval)


def _describe_lone_partition_operators(
    storage: CheckpointStorage, facts: CheckpointFacts
) -> tuple[OperatorDescription, ...]:
    """Read the operator metadata and schema of operators listed with partition 0 only.

    Only those: an operator with every partition listed needs no reads, so a healthy checkpoint
    costs no more than Spark's own restart reads.
    """
    partitions = _shuffle_partitions(facts)
    if partitions is None or partitions <= 1:
        return ()
    return tuple(_describe_operator(storage, operator) for operator in _operators_with_partition_0_only(facts))


def _operators_with_partition_0_only(facts: CheckpointFacts) -> list[int]:
    found: dict[int, set[int]] = {}
    for store in list_state_store_dirs(facts.listing):  # type: ignore[arg-type]
        found.setdefault(store.operator, set()).add(store.partition)
    return sorted(operator for operator, present in found.items() if present == {0})


def _describe_operator(storage: CheckpointStorage, operator: int) -> OperatorDescription:
    """A file that cannot be read or parsed describes nothing: the partitions stay missing."""
    metadata = _attempt("", find_operator_state_metadata, storage, operator).value
    schema = _attempt("", find_store_schema, storage, operator).value
    return OperatorDescription(operator, metadata, schema)
