"""Skip (a), planned: the latest, uncommitted batch marked done without running it: its place in the
logs, the file sink's empty entry, the state carried forward (skipstate.py), then its commit.
skip.py's docstring says what is written and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..compactible import is_compaction_batch
from ..errors import CheckpointError
from ..layout import COMMITS_DIR, COMPACT_FILE_SUFFIX
from ..logdir import read_commit, read_offset_seq
from ..metadatalog import log_batch_files, log_compact_interval, sink_log_location
from ..offsets import OffsetSeq
from ..statesummary import state_conf
from ..storage.checkpointstorage import CheckpointStorage
from .compactionfile import compaction_input_names
from .plan import FileState, MaintenancePlan, PlannedWrite, Precondition, precondition
from .planning import PlanStart, join, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS
from .sidecars import directory_uses_hadoop_crc
from .skipoffsets import (
    describe_source_range,
)
from .skipstate import survey_state
from .skipsurvey import ACTION, SHUFFLE_PARTITIONS_CONF, SINK_PREFIX, LogSettings, SkipSurvey
from .statestores import StateListings, list_state_listings

# Notes and refusals of every skip plan that meets the case.
_SINK_OUTPUT_NOTE = (
    "Output a sink already received from an earlier attempt of this batch (Kafka, a database, any sink "
    "that keeps no log) cannot be taken back by the skip"
)


_NO_SINK_NOTE = (
    "No file sink location was given: if the query writes to a file sink, its _spark_metadata needs an "
    "empty entry {batch} too, or readers of the output fail; plan again with the sink's location"
)


def plan_skip_batch(
    storage: CheckpointStorage,
    batch: int,
    *,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    parameters: Mapping[str, Any] | None = None,
    logs: LogSettings | None = None,
) -> MaintenancePlan:
    """Plan skip (a): batch ``batch`` (the latest, uncommitted) marked done with its state carried forward."""
    listings, start = start_skip_plan(
        storage, {"batch": batch, **(parameters or {})}, now=now, quiet_seconds=quiet_seconds
    )
    position = batch_position(listings, batch)
    if _is_committed_latest(listings, batch):
        # Spark ran it, or this skip did before its worker died: the run that resumes ends here.
        return start.nothing_to_do(f"nothing to do: batch {batch} is committed (commits/{batch} exists)")
    if not position.ok:
        return start.finish(summary=f"nothing to do: batch {batch} cannot be skipped", preconditions=(position,))
    return _finish_batch_skip(survey_skip(storage, listings, batch, logs=logs), start, position)


def _finish_batch_skip(skip: SkipSurvey, start: PlanStart, position: Precondition) -> MaintenancePlan:
    """The plan of skip (a): the writes of the ``skip`` survey, after the batch's ``position``."""
    return start.finish(
        writes=skip.writes,
        preconditions=(position, *skip.preconditions),
        summary=skip.summary(),
        notes=skip.notes,
    )


def start_skip_plan(
    storage: CheckpointStorage, parameters: Mapping[str, Any], *, now: float, quiet_seconds: float
) -> tuple[StateListings, PlanStart]:
    """The listings a skip plan judges, and the plan's start (``parameters``, "query-stopped")."""
    listings = list_state_listings(storage)
    return listings, start_plan(
        ACTION, parameters, listings.offsets, listings.commits, now=now, quiet_seconds=quiet_seconds
    )


def _is_committed_latest(listings: StateListings, batch: int) -> bool:
    """``batch`` is the latest of the offset log and committed: a skip (a) of it has nothing to do."""
    return batch in listings.commit_ids and listings.offset_ids[-1:] == [batch]


def batch_position(listings: StateListings, batch: int) -> Precondition:
    """ "batch-uncommitted": ``batch`` is the latest batch of the offset log, has no commit, and the
    batch before it has one (Spark runs only the latest batch again at restart)."""
    problem = _position_problem(listings, batch)
    if problem is not None:
        return precondition("batch-uncommitted", False, problem)
    return precondition("batch-uncommitted", True, f"offsets/{batch} is the latest batch and has no commit")


def _position_problem(listings: StateListings, batch: int) -> str | None:
    """Why ``batch`` is not the one batch a skip can take (see :func:`batch_position`), or None."""
    offsets, commits = listings.offset_ids, set(listings.commit_ids)
    latest = offsets[-1] if offsets else None
    if latest is None:
        return "the offset log is empty: no batch has started"
    if batch != latest:
        return (
            f"batch {batch} is not the latest batch of the offset log (latest: {latest}); "
            "only the batch a restart runs again can be skipped"
        )
    if batch in commits:
        return f"batch {batch} is committed (commits/{batch} exists)"
    if batch > 0 and batch - 1 not in commits:
        return f"commits/{batch - 1} is missing: the batch before {batch} never finished (repair the commit log first)"
    return None


def survey_skip(
    storage: CheckpointStorage,
    listings: StateListings,
    batch: int,
    *,
    describe: bool = True,
    logs: LogSettings | None = None,
) -> SkipSurvey:
    """The writes that commit ``batch`` without running it (state files first, the commit last)."""
    try:
        offsets = read_offset_seq(storage, batch)
        previous_commit = read_commit(storage, batch - 1) if batch > 0 else None
    except CheckpointError as exc:
        return _unreadable_logs_survey(batch, exc)
    conf = offsets.metadata.conf if offsets.metadata else {}
    survey = SkipSurvey(batch, state_conf(conf), _shuffle_partitions(conf))
    survey.preconditions.append(precondition("logs-readable", True, f"offsets/{batch} and the commit before it read"))
    survey_state(survey, listings)
    _survey_sink(survey, logs or LogSettings())
    _survey_commit(survey, listings, previous_commit)
    if describe:
        survey.notes.extend(skipped_ranges_notes(storage, batch, offsets))
    survey.notes.append(_SINK_OUTPUT_NOTE)
    return survey


def _unreadable_logs_survey(batch: int, error: CheckpointError) -> SkipSurvey:
    """The survey of a batch whose offsets or previous commit cannot be read: "logs-readable" fails."""
    survey = SkipSurvey(batch, state_conf({}), None)
    survey.preconditions.append(precondition("logs-readable", False, str(error)))
    return survey


def _survey_commit(survey: SkipSurvey, listings: StateListings, previous_commit: Any) -> None:
    """The commit of the batch, written last, and the precondition on the format of the commit before it."""
    commit = _commit_write(listings, survey.batch, previous_commit)
    survey.preconditions.append(_commit_format(previous_commit, survey.batch))
    survey.writes.append(commit)


def _survey_sink(survey: SkipSurvey, logs: LogSettings) -> None:
    """The file sink's log gets an empty entry for the batch (FileStreamSink adds one per batch, and
    readers of the output demand every id from the latest compaction on: "…/N doesn't exist")."""
    sink_storage = logs.sink_storage
    if sink_storage is None:
        survey.notes.append(_NO_SINK_NOTE.format(batch=survey.batch))
        return
    log_dir, _ = sink_log_location(sink_storage)
    entries = sink_storage.list_dir(log_dir)
    listing = log_batch_files(entries)
    latest = max(listing, default=-1)
    if latest >= survey.batch:
        survey.notes.append(_sink_ahead_note(log_dir, listing, survey.batch))
        return
    if latest != survey.batch - 1:
        survey.refused.append(f"the file sink's log ends at batch {latest}, not at {survey.batch - 1}")
        return
    crc = directory_uses_hadoop_crc({info.name for info in entries})
    survey.writes.append(_sink_write(log_dir, listing, survey.batch, crc, logs.compact_interval))


def _sink_ahead_note(log_dir: str, listing: Mapping[int, Any], batch: int) -> str:
    """Why the file sink's log, which reaches ``batch`` already, gets no entry for it."""
    if batch in listing:
        return (
            f"the file sink's log already has batch {batch} ({join(log_dir, listing[batch].name)}): "
            "its output stays in the sink, and Spark does not write it again"
        )
    return f"the file sink's log is ahead of batch {batch}"


def _sink_write(log_dir: str, listing: Mapping[int, Any], batch: int, crc: bool, default_interval: int) -> PlannedWrite:
    """``_spark_metadata/N`` without entries, or ``N.compact`` repeating the entries before it."""
    interval = log_compact_interval(listing, default_interval)
    if not is_compaction_batch(batch, interval):
        return PlannedWrite(
            SINK_PREFIX + join(log_dir, str(batch)),
            (),
            2,
            f"the file sink's entry for batch {batch}: no file",
            hadoop_crc=crc,
        )
    return _sink_compaction_write(log_dir, listing, batch, crc, interval)


def _sink_compaction_write(
    log_dir: str, listing: Mapping[int, Any], batch: int, crc: bool, interval: int
) -> PlannedWrite:
    """``N.compact`` of the file sink's log: the entries of the files before it, none of its own."""
    names = {info.name for info in listing.values()}
    inputs = [name for name in compaction_input_names(batch, interval)[:-1] if name in names]
    sizes = {info.name: info.size for info in listing.values()}
    return PlannedWrite(
        SINK_PREFIX + join(log_dir, f"{batch}{COMPACT_FILE_SUFFIX}"),
        tuple(FileState(SINK_PREFIX + join(log_dir, name), sizes[name]) for name in inputs),
        sum(sizes[name] for name in inputs),
        f"the file sink's compaction batch {batch}: the entries before it and no file of its own",
        hadoop_crc=crc,
    )


def _shuffle_partitions(conf: Mapping[str, str]) -> int | None:
    value = conf.get(SHUFFLE_PARTITIONS_CONF, "")
    return int(value) if value.isdigit() else None


def _commit_format(previous: Any, batch: int) -> Precondition:
    version = previous.version if previous is not None else 1
    if version == 1:
        return precondition("commit-format", True, "commit log v1: the commit carries only the watermark")
    return precondition(
        "commit-format",
        False,
        f"commits/{batch - 1} is v{version} (state unique ids or sink metadata): a commit of a skipped batch "
        "cannot name state files Spark never wrote; not supported",
    )


def _commit_write(listings: StateListings, batch: int, previous: Any) -> PlannedWrite:
    names = {info.name for info in listings.commits}
    inputs = ()
    if previous is not None:
        prior = next(info for info in listings.commits if info.name == str(batch - 1))
        inputs = (FileState(f"{COMMITS_DIR}/{batch - 1}", prior.size),)
    watermark = previous.next_batch_watermark_ms if previous is not None else 0
    return PlannedWrite(
        path=f"{COMMITS_DIR}/{batch}",
        inputs=inputs,
        estimated_bytes=len(commit_bytes(watermark)),
        reason=f"marks batch {batch} done; watermark {watermark} carried from "
        + (f"commits/{batch - 1}" if previous is not None else "the start (no batch before)"),
        hadoop_crc=directory_uses_hadoop_crc(names),
    )


def commit_bytes(watermark_ms: int) -> bytes:
    """``commits/N`` as CommitLog v1 writes it: the version line, then the metadata JSON, no newline."""
    return b'v1\n{"nextBatchWatermarkMs":' + str(watermark_ms).encode() + b"}"


def skipped_ranges_notes(storage: CheckpointStorage, batch: int, offsets: OffsetSeq) -> list[str]:
    """Say, per source, what batch ``batch`` would have read: from the end offsets of the batch
    before to those of ``offsets/N`` (file sources also with the number of files)."""
    previous = None
    if batch > 0:
        try:
            previous = read_offset_seq(storage, batch - 1)
        except CheckpointError:
            previous = None
    notes = []
    for index, end in enumerate(offsets.offsets):
        start = previous.offsets[index] if previous is not None and index < len(previous.offsets) else None
        notes.append(f"source {index}: skipped " + describe_source_range(storage, index, start, end))
    return notes
