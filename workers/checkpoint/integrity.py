"""Integrity checks: what would stop Spark from restarting a query, and what is wrong or wasteful.

Facts are gathered once at the edge (``gather_facts``): one recursive listing of the checkpoint
(and of a file sink's ``_spark_metadata``), and reads of only the files Spark itself reads when
the query restarts:

* ``metadata`` (StreamMetadata, read by StreamExecution);
* ``offsets/<L>`` and ``offsets/<L-1>``, L the latest batch (MicroBatchExecution's
  populateStartOffsets and validateOffsetLogAndGetPrevOffset);
* the latest ``commits/<C>`` (CommitLog.getLatest);
* for each compactible log (a file source's ``sources/<i>``, the sink's ``_spark_metadata``), the
  latest compaction and the batches after it (CompactibleFileStreamLog.allFiles).

Older log files are not read: with Spark's default of 100 retained batches that would cost
hundreds of GETs per check; an empty one is still found by its listed size. Everything after
the gathering is a pure function of the facts, and no damage makes the check raise: a file that
cannot be listed, read or parsed is itself a finding.

Severities: ``error`` = Spark will fail to restart the query (or, where ``restart_impact`` says
so, fails soon after); ``warning`` = the restart works but something is wrong or wasteful;
``info`` = worth knowing. Codes (stable, for filters and tests):

    directory-unreadable     a directory could not be listed
    metadata-missing         no ``metadata`` file (Spark 4.2+ refuses to start)
    log-file-empty           an empty log file ("Incomplete log file")
    log-file-incomplete      a log file that ends before its metadata line
    log-version-unsupported  a ``vN`` header newer than this reader supports
    file-corrupt             any other content Spark cannot parse
    file-unreadable          a read failed (permission, network), or the file vanished
    offsets-gap              batch ids missing from ``offsets/``
    batch-uncommitted        the latest batch has offsets but no commit (normal after a stop mid-batch)
    uncommitted-batches      more than one batch after the latest commit
    commit-missing           a batch below the latest commit has offsets but no commit
    commit-without-offsets   ``commits/<N>`` beyond the latest offsets
    compact-missing          a ``N.compact`` the latest batch of a compactible log is read through
    log-file-missing         a batch file after that compaction
    sink-log-behind-commits  the sink log ends before the latest committed batch
    sink-log-missing         a sink log with no batch file at all
    temporary-file           a temporary file left by an atomic write (or its checksum)
    orphan-checksum          a Hadoop ``.<name>.crc`` whose file is gone
    state-partition-missing  a state partition directory is missing (an operator Spark runs on one
                             partition, a global limit or aggregation, has partition 0 only)
    state-version-missing    a state store cannot rebuild the version the restart loads
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .compactible import next_compaction_batch_id
from .errors import (
    CheckpointError,
    CorruptFileError,
    IncompleteLogFileError,
    MissingFileError,
    TruncatedFileError,
    UnsupportedVersionError,
)
from .inventory import TreeListing, is_hadoop_checksum, is_side_file, is_temporary_name, join_path, list_tree
from .layout import COMMITS_DIR, COMPACT_FILE_SUFFIX, METADATA_FILE, OFFSETS_DIR
from .logdir import find_stream_metadata, list_batch_ids, read_commit, read_offset_seq
from .metadatalog import (
    DEFAULT_COMPACT_INTERVAL,
    LogKind,
    file_source_log_dirs,
    files_read_for_latest,
    log_batch_files,
    log_compact_interval,
    read_metadata_log,
    sink_log_location,
)
from .offsets import OffsetSeq, offset_as_json
from .rocksdbstate import parse_rocksdb_store_files, resolve_load_chain
from .singlepartition import runs_on_one_partition
from .stateinventory import (
    STATE_DIR,
    StateStoreDir,
    detect_provider,
    files_for_version,
    list_state_store_dirs,
    parse_hdfs_state_files,
)
from .stateschema import OperatorStateMetadata, StoreSchema, find_operator_state_metadata, find_store_schema
from .storage import CheckpointStorage, FileInfo

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"
# A running query's atomic writes leave a temporary file for moments; younger ones are not findings.
TEMPORARY_FILE_GRACE_SECONDS = 600


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem (or fact) about a checkpoint; ``path`` is relative to the checkpoint root,
    or the sink log's URL followed by the file name."""

    severity: Severity
    code: str
    path: str
    message: str
    restart_impact: str


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    """What reading one file (or one compactible log) gave: a parsed value, or the error."""

    path: str
    value: Any = None
    error: CheckpointError | None = None


@dataclass(frozen=True, slots=True)
class CompactibleLog:
    """A file source's or file sink's log: its listing and the outcome of reading it as allFiles does.

    ``path`` is the directory relative to the checkpoint root, or the sink log's URL.
    """

    path: str
    kind: LogKind
    files: tuple[FileInfo, ...]
    outcome: ReadOutcome
    # The query's configured compactInterval: Spark's interval until a .compact file exists.
    default_interval: int = DEFAULT_COMPACT_INTERVAL


@dataclass(frozen=True, slots=True)
class OperatorDescription:
    """What an operator's metadata and its partition 0's state schema say (None: absent or unreadable)."""

    operator: int
    metadata: OperatorStateMetadata | None
    schema: StoreSchema | None


@dataclass(frozen=True, slots=True)
class CheckpointFacts:
    """Everything the checks look at, gathered by one walk and a handful of reads."""

    listing: TreeListing
    reads: tuple[ReadOutcome, ...]
    logs: tuple[CompactibleLog, ...] = ()
    sink_log_failures: tuple[CheckpointError, ...] = ()
    # The sink log's own listing (kept for the inventory, which then needs no second walk).
    sink_listing: TreeListing | None = None
    # When the listing was taken (epoch seconds): tells a write in progress from a leftover.
    observed_at: float | None = None
    # Operators listed with partition 0 only, described so that one Spark runs on one partition is told.
    lone_partition_operators: tuple[OperatorDescription, ...] = ()
    # The batch ids listed in offsets/ and commits/, worked out once: the checks ask for them often.
    offset_ids: list[int] = field(init=False)
    commit_ids: list[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset_ids", list_batch_ids(self.listing, OFFSETS_DIR))  # type: ignore[arg-type]
        object.__setattr__(self, "commit_ids", list_batch_ids(self.listing, COMMITS_DIR))  # type: ignore[arg-type]

    def value_of(self, path: str) -> Any:
        """The parsed value of a file that was read, or None."""
        return next((read.value for read in self.reads if read.path == path), None)


# --- the edge -------------------------------------------------------------------------------


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
    logs = [
        _read_compactible_log(storage, dirname, tuple(listing.list_dir(dirname)), dirname, "source", interval)
        for dirname in _file_source_logs(reads)
    ]
    if sink_log is None:
        facts = CheckpointFacts(listing, reads, tuple(logs), observed_at=observed_at)
    else:
        dirname, url = sink_log_location(sink_log)
        sink_listing = list_tree(sink_log, dirname)
        files = tuple(sink_listing.list_dir(dirname))
        logs.append(_read_compactible_log(sink_log, dirname, files, url, "sink", interval))
        facts = CheckpointFacts(listing, reads, tuple(logs), sink_listing.failures, sink_listing, observed_at)
    return replace(facts, lone_partition_operators=_describe_lone_partition_operators(storage, facts))


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


# --- the checks (pure) ----------------------------------------------------------------------


def run_checks(facts: CheckpointFacts) -> list[Finding]:
    """Run every check over the facts; errors first, then warnings, then infos, by path."""
    findings = [
        *check_listing_failures(facts),
        *check_metadata(facts),
        *check_read_files(facts),
        *check_empty_files(facts),
        *check_offsets_gaps(facts.offset_ids),
        *check_uncommitted(facts.offset_ids, facts.commit_ids),
        *check_commits_without_offsets(facts.offset_ids, facts.commit_ids),
        *check_compactible_logs(facts),
        *check_sink_log_behind(facts),
        *check_sink_log_present(facts),
        *check_leftovers(facts),
        *check_state(facts),
    ]
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.path, f.code))


def check_listing_failures(facts: CheckpointFacts) -> Iterator[Finding]:
    for exc in (*facts.listing.failures, *facts.sink_log_failures):
        yield Finding(
            "error",
            "directory-unreadable",
            exc.path,
            _reason(exc),
            "Spark cannot list it either; nothing below it was checked.",
        )


def check_metadata(facts: CheckpointFacts) -> Iterator[Finding]:
    if any(info.name == METADATA_FILE for info in facts.listing.list_dir()):
        return
    if facts.offset_ids or facts.commit_ids:
        yield Finding(
            "error",
            "metadata-missing",
            METADATA_FILE,
            "the checkpoint has batches but no metadata file",
            "Spark 4.2+ refuses to start (STREAMING_CHECKPOINT_MISSING_METADATA_FILE, unless "
            "spark.sql.streaming.checkpoint.verifyMetadataExists.enabled=false); older versions "
            "start under a new query id, which can duplicate writes.",
        )
    else:
        yield Finding("info", "metadata-missing", METADATA_FILE, "the query has not started yet", "none")


def check_read_files(facts: CheckpointFacts) -> Iterator[Finding]:
    """Every file read at restart that failed; these are errors because Spark reads them too."""
    for read in facts.reads:
        if read.error is not None:
            yield _unreadable_file_finding(read.error, read.error.path, "error", _restart_read_impact(read.path))


def _restart_read_impact(path: str) -> str:
    if path == METADATA_FILE:
        return "Spark fails at start: StreamExecution reads the query id from it."
    return "Spark fails at restart: it reads this file to find where to resume."


def _unreadable_file_finding(exc: CheckpointError, path: str, severity: Severity, impact: str) -> Finding:
    """Turn a read or parse error into a finding whose code says what kind of damage it is."""
    return Finding(severity, _error_code(exc), path, _reason(exc), impact)


def _error_code(exc: CheckpointError) -> str:
    if isinstance(exc, IncompleteLogFileError):
        return "log-file-empty"
    if isinstance(exc, TruncatedFileError):
        return "log-file-incomplete"
    if isinstance(exc, UnsupportedVersionError):
        return "log-version-unsupported"
    return "file-corrupt" if isinstance(exc, CorruptFileError) else "file-unreadable"


def _reason(exc: CheckpointError) -> str:
    """The error's message without the leading path, which the finding carries separately."""
    return str(exc).removeprefix(f"{exc.path}: ")


def check_empty_files(facts: CheckpointFacts) -> Iterator[Finding]:
    """Empty metadata-log files found by their listed size, except those already reported."""
    reported = {read.error.path for read in (*facts.reads, *(log.outcome for log in facts.logs)) if read.error}
    restart_paths = _restart_paths(facts)
    for path, info in _log_files(facts):
        if info.size == 0 and path not in reported and not is_side_file(info.name):
            on_restart_path = path in restart_paths
            yield Finding(
                "error" if on_restart_path else "warning",
                "log-file-empty",
                path,
                "Incomplete log file: the file is empty",
                _restart_read_impact(path)
                if on_restart_path
                else "Spark's restart does not read it, but reading this batch (rollback, state reader) fails.",
            )


def _log_files(facts: CheckpointFacts) -> Iterator[tuple[str, FileInfo]]:
    """Every file of the offsets, commits and compactible logs, by its finding path."""
    for dirname in (OFFSETS_DIR, COMMITS_DIR):
        for info in facts.listing.list_dir(dirname):
            yield join_path(dirname, info.name), info
    for log in facts.logs:
        for info in log.files:
            yield join_path(log.path, info.name), info


def _restart_paths(facts: CheckpointFacts) -> set[str]:
    paths = {read.path for read in facts.reads}
    for log in facts.logs:
        paths.update(join_path(log.path, name) for name in needed_log_files(log.files, log.default_interval))
    return paths


def check_offsets_gaps(offset_ids: Sequence[int]) -> Iterator[Finding]:
    """Missing offsets files between the oldest and the latest, and the one before the latest."""
    if not offset_ids:
        return
    latest = offset_ids[-1]
    lowest = min(offset_ids[0], max(latest - 1, 0))
    for first, last in _missing_ranges(offset_ids, lowest):
        needed_at_restart = first <= latest - 1 <= last
        yield Finding(
            "error" if needed_at_restart else "warning",
            "offsets-gap",
            f"{OFFSETS_DIR}/{first}",
            f"the offsets of {_batch_range(first, last)} are missing; the log holds {offset_ids[0]} to {latest}",
            f"Spark fails at restart: 'batch {latest - 1} doesn't exist' (it needs the offsets before "
            f"batch {latest}), unless the query runs with asyncProgressTrackingEnabled, whose logs have "
            "gaps by design and which resumes from the batch before the gap."
            if needed_at_restart
            else "The restart works; reading those batches (rollback, state reader) fails.",
        )


def _missing_ranges(ids: Sequence[int], lowest: int) -> Iterator[tuple[int, int]]:
    """Yield (first, last) of each run of numbers missing from sorted ``ids`` from ``lowest`` on.

    Walks the ids, not the range: a bogus name such as ``offsets/9223372036854775806`` must
    not make the check loop for ages.
    """
    previous = lowest - 1
    for number in ids:
        if number > previous + 1:
            yield previous + 1, number - 1
        previous = max(previous, number)


def _batch_range(first: int, last: int) -> str:
    return f"batch {first}" if first == last else f"batches {first} to {last}"


def check_uncommitted(offset_ids: Sequence[int], commit_ids: Sequence[int]) -> Iterator[Finding]:
    """Batches with offsets but no commit: one after the latest commit is normal, more is not."""
    if not offset_ids:
        return
    latest, committed = offset_ids[-1], set(commit_ids)
    beyond = [b for b in offset_ids if not commit_ids or b > commit_ids[-1]]
    if beyond == [latest]:
        yield Finding(
            "info",
            "batch-uncommitted",
            f"{OFFSETS_DIR}/{latest}",
            f"batch {latest} was planned but has no commit",
            f"Spark re-runs batch {latest} with the same offsets.",
        )
    elif len(beyond) > 1:
        yield _uncommitted_batches(beyond, commit_ids)
    for batch_id in offset_ids:
        if commit_ids and commit_ids[0] <= batch_id < commit_ids[-1] and batch_id not in committed:
            yield Finding(
                "warning",
                "commit-missing",
                f"{COMMITS_DIR}/{batch_id}",
                f"batch {batch_id} has offsets but no commit, although later batches are committed",
                "The restart works (Spark reads only the latest commit), but the commit log was damaged or edited.",
            )


def _uncommitted_batches(beyond: list[int], commit_ids: Sequence[int]) -> Finding:
    since = f"after the latest commit ({commit_ids[-1]})" if commit_ids else "and there is no commit log"
    return Finding(
        "warning",
        "uncommitted-batches",
        f"{OFFSETS_DIR}/{beyond[0]}",
        f"{len(beyond)} batches have offsets but no commit ({beyond[0]} to {beyond[-1]}) {since}",
        f"Spark re-runs only batch {beyond[-1]}, from the offsets of batch {beyond[-1] - 1}; the other "
        "uncommitted batches are never re-run, so their data may be missing from the sink.",
    )


def check_commits_without_offsets(offset_ids: Sequence[int], commit_ids: Sequence[int]) -> Iterator[Finding]:
    """Commit files beyond the latest offsets file (below the oldest is only purge lag)."""
    latest = offset_ids[-1] if offset_ids else -1
    beyond = [batch_id for batch_id in commit_ids if batch_id > latest]
    if not beyond:
        return
    # Spark re-runs the latest planned batch; the first commit it then tries to write that
    # already exists fails it (MicroBatchExecution.markMicroBatchEnd).
    clash = min(batch_id for batch_id in commit_ids if batch_id >= max(latest, 0))
    for batch_id in beyond:
        yield Finding(
            "error",
            "commit-without-offsets",
            f"{COMMITS_DIR}/{batch_id}",
            f"batch {batch_id} is committed but has no offsets (the latest offsets are of batch {latest})",
            f"Spark re-runs batch {max(latest, 0)} and fails when it commits batch {clash}, whose commit "
            "file already exists (CONCURRENT_STREAM_LOG_UPDATE).",
        )


def needed_log_files(files: Iterable[FileInfo], default_interval: int = DEFAULT_COMPACT_INTERVAL) -> list[str]:
    """Name the files CompactibleFileStreamLog.allFiles reads for the latest batch of a listing."""
    return files_read_for_latest(log_batch_files(files), default_interval)


def check_compactible_logs(facts: CheckpointFacts) -> Iterator[Finding]:
    for log in facts.logs:
        yield from _missing_log_files(log)
        error = log.outcome.error
        if error is not None and not isinstance(error, MissingFileError):
            path = join_path(log.path, error.path.rpartition("/")[2])
            yield _unreadable_file_finding(error, path, "error", _compactible_impact(log.kind))


def _missing_log_files(log: CompactibleLog) -> Iterator[Finding]:
    present = {info.name for info in log.files}
    needed = needed_log_files(log.files, log.default_interval)
    for name in needed:
        if name not in present:
            is_compact = name.endswith(COMPACT_FILE_SUFFIX)
            yield Finding(
                "error",
                "compact-missing" if is_compact else "log-file-missing",
                join_path(log.path, name),
                f"the latest batch of the {log.kind} log is read through {needed[0]} and the "
                f"batches after it, but {name} is missing",
                _compactible_impact(log.kind),
            )


def _compactible_impact(kind: LogKind) -> str:
    if kind == "source":
        return "Spark fails at restart: the file source reads its whole log when it starts."
    return "Every reader of the sink's output fails now, and the query fails at the sink's next compaction."


def check_sink_log_behind(facts: CheckpointFacts) -> Iterator[Finding]:
    """The file sink logs every batch before it is committed, so its log never ends earlier."""
    commit_ids = facts.commit_ids
    for log in facts.logs:
        batch_files = log_batch_files(log.files)
        if log.kind != "sink" or not commit_ids or not batch_files:
            continue
        end = max(batch_files)
        if end >= commit_ids[-1]:
            continue
        committed = commit_ids[-1]
        yield Finding(
            "error",
            "sink-log-behind-commits",
            join_path(log.path, str(end + 1)),
            f"the sink log ends at batch {end} but the commit log at batch {committed}: the sink's "
            f"entries of {_batch_range(end + 1, committed)} are lost",
            f"The restart works and Spark does not rewrite committed batches; once batch {committed + 1} "
            "is added every reader of the sink fails, and the query fails at the compaction of batch "
            f"{next_compaction_batch_id(committed, log_compact_interval(batch_files, log.default_interval))}.",
        )


def check_sink_log_present(facts: CheckpointFacts) -> Iterator[Finding]:
    """A sink log given for a checkpoint with commits but holding no batch file at all."""
    for log in facts.logs:
        if log.kind == "sink" and facts.commit_ids and not log_batch_files(log.files):
            yield Finding(
                "warning",
                "sink-log-missing",
                log.path,
                "no batch file in the sink log: this is not a file sink's output, or its log was deleted",
                "If it is a file sink, the restart works but Spark starts a new log at the next batch "
                "and readers of the output fail. If it is not, do not check it as a sink log.",
            )


def check_leftovers(facts: CheckpointFacts) -> Iterator[Finding]:
    """Temporary files of interrupted writes and Hadoop checksums of deleted files, everywhere."""
    in_progress_after = None if facts.observed_at is None else facts.observed_at - TEMPORARY_FILE_GRACE_SECONDS
    for dirname, entries in facts.listing.directories.items():
        yield from _leftovers_in(dirname, entries, in_progress_after)
    for log in facts.logs:
        if log.kind == "sink":
            yield from _leftovers_in(log.path, log.files, in_progress_after)


def _leftovers_in(dirname: str, entries: Sequence[FileInfo], in_progress_after: float | None) -> Iterator[Finding]:
    """``in_progress_after``: a temporary file modified after this (epoch seconds) is a write in flight."""
    names = {info.name for info in entries if not info.is_dir}
    recent = {
        info.name
        for info in entries
        if in_progress_after is not None and info.mtime is not None and info.mtime > in_progress_after
    }
    for name in sorted(names):
        checked = name[1 : -len(".crc")] if is_hadoop_checksum(name) else name
        if is_temporary_name(checked) and name in recent:
            continue
        if is_temporary_name(checked):
            yield Finding(
                "warning",
                "temporary-file",
                join_path(dirname, name),
                "temporary file of an atomic write that never completed (or is in progress)",
                "None: Spark ignores it. When no query is running it is garbage from a crash and can be deleted.",
            )
        elif checked != name and checked not in names:
            yield Finding(
                "warning",
                "orphan-checksum",
                join_path(dirname, name),
                f"Hadoop checksum of {checked}, which no longer exists",
                "None: Spark ignores it. It was left by a deletion that bypassed Hadoop; it can be deleted.",
            )


def check_state(facts: CheckpointFacts) -> Iterator[Finding]:
    """Every state store must be able to rebuild the version the restarted batch loads."""
    version = restart_state_version(facts.offset_ids, facts.commit_ids)
    if version is None:
        return
    stores = list_state_store_dirs(facts.listing)  # type: ignore[arg-type]
    yield from _missing_partitions(stores, _shuffle_partitions(facts), _one_partition_operators(facts))
    if version == 0:
        return  # batch 0 starts from empty state
    for store in stores:
        yield from _unloadable_version(store, version)


def restart_state_version(offset_ids: Sequence[int], commit_ids: Sequence[int]) -> int | None:
    """The state version a restart loads: batch N loads version N, and the restart runs the
    batch after the latest one when that is committed, else the latest one again."""
    if not offset_ids:
        return None
    latest = offset_ids[-1]
    return latest + 1 if commit_ids and commit_ids[-1] == latest else latest


def _one_partition_operators(facts: CheckpointFacts) -> set[int]:
    return {op.operator for op in facts.lone_partition_operators if runs_on_one_partition(op.metadata, op.schema)}


def _shuffle_partitions(facts: CheckpointFacts) -> int | None:
    """``spark.sql.shuffle.partitions`` as the latest offsets file persisted it (the state's partitions)."""
    offsets = facts.offset_ids
    value = facts.value_of(f"{OFFSETS_DIR}/{offsets[-1]}") if offsets else None
    conf = value.metadata.conf if isinstance(value, OffsetSeq) and value.metadata else {}
    number = conf.get(SHUFFLE_PARTITIONS_CONF, "")
    return int(number) if number.isdigit() else None


def _missing_partitions(
    stores: Sequence[StateStoreDir], shuffle_partitions: int | None, one_partition: set[int]
) -> Iterator[Finding]:
    """``one_partition``: operators Spark runs on partition 0 alone (a global limit or aggregation)."""
    if shuffle_partitions is None:
        return
    found: dict[int, set[int]] = {}
    for store in stores:
        found.setdefault(store.operator, set()).add(store.partition)
    for operator, present in found.items():
        partitions = 1 if operator in one_partition else shuffle_partitions
        # The end marker makes the walk report partitions missing after the last one found.
        for first, last in _missing_ranges([*sorted(p for p in present if p < partitions), partitions], 0):
            yield Finding(
                "error",
                "state-partition-missing",
                f"{STATE_DIR}/{operator}/{first}",
                f"operator {operator} has no directory for {_partition_range(first, last)} of {partitions}",
                f"Spark fails at restart: the task of partition {first} finds no state to load.",
            )


def _partition_range(first: int, last: int) -> str:
    return f"partition {first}" if first == last else f"partitions {first} to {last}"


def _unloadable_version(store: StateStoreDir, version: int) -> Iterator[Finding]:
    provider = detect_provider(store.files)
    if provider == "rocksdb":
        missing = _missing_rocksdb_file(store, version)
    elif provider in ("hdfs", "empty"):
        missing = _missing_hdfs_file(store, version)
    else:
        return  # names no provider writes: nothing to tell about loading
    if missing is not None:
        yield Finding(
            "error",
            "state-version-missing",
            missing.path,
            f"state version {version} cannot be rebuilt: {missing.reason}",
            f"Spark fails at restart: loading version {version} of this store fails "
            "(CANNOT_LOAD_STATE_STORE: the file does not exist).",
        )


def _missing_hdfs_file(store: StateStoreDir, version: int) -> MissingFileError | None:
    """HDFSBackedStateStoreProvider: the latest snapshot at or below the version, then every delta."""
    state_files, _ = parse_hdfs_state_files(store.files)
    try:
        files_for_version(state_files, version, source=store.path)
    except MissingFileError as exc:
        return exc
    return None


def _missing_rocksdb_file(store: StateStoreDir, version: int) -> MissingFileError | None:
    """RocksDB: the newest ``N.zip`` at or below the version, then every changelog after it.

    Best effort for checkpoint format 2 (``N_<uuid>.*``): which file of a version a load follows
    depends on the commit log's unique ids and each changelog's lineage, which would mean
    decompressing changelogs; here any file of a version counts.
    """
    files = parse_rocksdb_store_files(store.files)
    if files.checkpoint_format == 2:
        files = replace(
            files,
            zips=tuple(replace(f, unique_id=None) for f in files.zips),
            changelogs=tuple(replace(f, unique_id=None) for f in files.changelogs),
        )
    chain = resolve_load_chain(files, version)
    if chain.is_loadable:
        return None
    base = chain.snapshot.version if chain.snapshot else 0
    first_missing, _ = next(_missing_ranges(sorted({f.version for f in chain.changelogs}) + [version + 1], base + 1))
    return MissingFileError(
        join_path(store.path, f"{first_missing}.changelog"),
        f"{'; '.join(chain.problems)}: version {version} is rebuilt from "
        f"{chain.snapshot.name if chain.snapshot else 'version 0'} and every changelog after it",
    )
