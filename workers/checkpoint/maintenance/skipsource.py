"""Skip (b), planned and built: part of a source skipped. The latest, uncommitted batch N is
rewritten to read only what is skipped (a Kafka partition's offsets up to a given offset, or named
files of a file source), then marked done as skip (a) does; what else N would have read is read
by batch N + 1.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..compactible import FileEntry, is_compaction_batch
from ..errors import CheckpointError
from ..layout import COMPACT_FILE_SUFFIX, OFFSETS_DIR
from ..logdir import read_offset_seq
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, log_batch_files, log_compact_interval
from ..offsets import SERIALIZED_VOID_OFFSET, OffsetSeq
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import plural
from .plan import FileState, MaintenancePlan, PlannedWrite, Precondition, precondition
from .planning import PlanStart
from .preconditions import DEFAULT_QUIET_SECONDS
from .sidecars import directory_uses_hadoop_crc
from .skipbatch import batch_position, start_skip_plan, survey_skip
from .skipoffsets import (
    SkipRefused,
    file_log_offset,
    kafka_json,
    kafka_skip_offsets,
    rewrite_offset_lines,
    same_file,
    source_log_bytes,
    source_log_file,
    source_log_lines,
    with_batch_id,
)
from .skipsurvey import LogSettings
from .statestores import StateListings


def plan_skip_source(
    storage: CheckpointStorage,
    request: Mapping[str, Any],
    *,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    logs: LogSettings | None = None,
) -> MaintenancePlan:
    """Plan skip (b): the latest, uncommitted batch N is rewritten to read only what is skipped (a Kafka
    partition's offsets up to ``to_offset``, or the named files), then marked done as skip (a) does; what
    else N would have read is read by batch N + 1."""
    listings, start = start_skip_plan(storage, request, now=now, quiet_seconds=quiet_seconds)
    batch = listings.offset_ids[-1] if listings.offset_ids else -1
    position = batch_position(listings, batch)
    if not position.ok:
        return start.finish(summary="nothing to do: no uncommitted batch to skip from", preconditions=(position,))
    rewrite = _rewrite_or_refusal(storage, batch, request, logs)
    if isinstance(rewrite, Precondition):
        return start.finish(summary="nothing to do: the skip is refused", preconditions=(position, rewrite))
    return _finish_source_skip(storage, start, listings, position, rewrite, logs)


def _rewrite_or_refusal(
    storage: CheckpointStorage, batch: int, request: Mapping[str, Any], logs: LogSettings | None
) -> SourceRewrite | Precondition:
    """The rewrites of a source skip of ``batch``, or the failed "source-range" that refuses it."""
    try:
        return skip_source_writes(storage, batch, request, (logs or LogSettings()).compact_interval)
    except (SkipRefused, CheckpointError) as exc:
        return precondition("source-range", False, str(exc))


def _finish_source_skip(
    storage: CheckpointStorage,
    start: PlanStart,
    listings: StateListings,
    position: Precondition,
    rewrite: SourceRewrite,
    logs: LogSettings | None,
) -> MaintenancePlan:
    """The plan of a source skip: the ``rewrite`` of the latest batch, then skip (a)'s writes for it."""
    batch = listings.offset_ids[-1]
    skip = survey_skip(storage, listings, batch, describe=False, logs=logs)
    return start.finish(
        writes=(*rewrite.writes, *skip.writes),
        preconditions=(position, precondition("source-range", True, rewrite.what), *skip.preconditions),
        summary=f"skip {rewrite.what}: batch {batch} reads only that and is marked done without running",
        notes=(*rewrite.notes, *skip.notes),
    )


@dataclass(frozen=True, slots=True)
class SourceRewrite:
    """The log rewrites of a source skip (before the state and commit writes), what is skipped, notes."""

    writes: tuple[PlannedWrite, ...]
    what: str
    notes: tuple[str, ...]


def skip_source_writes(
    storage: CheckpointStorage, batch: int, request: Mapping[str, Any], compact_interval: int = DEFAULT_COMPACT_INTERVAL
) -> SourceRewrite:
    """Plan the rewrites of ``offsets/N`` (and of the file source log) for a source skip."""
    if batch == 0:
        raise SkipRefused("batch 0 has no batch before it whose end offsets say where each source starts")
    current = read_offset_seq(storage, batch)
    previous = read_offset_seq(storage, batch - 1)
    source = int(request["source"])
    _check_source_of_both(source, batch, current, previous)
    lines = _other_sources_at_start(current, previous, source)
    if "files" in request:
        logs, what, notes = _file_source_rewrite(
            storage, source, (previous, current), request["files"], compact_interval
        )
    else:
        logs = ()
        what, notes = _kafka_rewrite(batch, current, previous, request, lines)
    offsets_write = [_offsets_write(storage, batch, lines)] if lines else []
    return SourceRewrite((*logs, *offsets_write), what, tuple(notes))


def _check_source_of_both(source: int, batch: int, current: OffsetSeq, previous: OffsetSeq) -> None:
    if not 0 <= source < len(current.offsets) or len(previous.offsets) != len(current.offsets):
        raise SkipRefused(f"source {source} is not a source of both offsets/{batch - 1} and offsets/{batch}")


def _other_sources_at_start(current: OffsetSeq, previous: OffsetSeq, source: int) -> dict[int, str]:
    """The other sources' lines set to where they started (the batch reads nothing from them)."""
    return {
        index: start or SERIALIZED_VOID_OFFSET
        for index, (start, end) in enumerate(zip(previous.offsets, current.offsets, strict=True))
        if index != source and start != end
    }


def _kafka_rewrite(
    batch: int, current: OffsetSeq, previous: OffsetSeq, request: Mapping[str, Any], lines: dict[int, str]
) -> tuple[str, list[str]]:
    """Set source ``request["source"]``'s line of ``offsets/N`` (in ``lines``); what is skipped, and notes."""
    source, partition, to_offset = int(request["source"]), str(request["partition"]), int(request["to_offset"])
    rewritten, count = kafka_skip_offsets(previous.offsets[source], current.offsets[source], partition, to_offset)
    lines[source] = kafka_json(rewritten)
    notes = [
        f"offsets/{batch} source {source} before: {current.offsets[source]}",
        f"offsets/{batch} source {source} after: {lines[source]}",
        f"the skipped batch starts where batch {batch - 1} ended (offsets/{batch - 1}): {previous.offsets[source]}; "
        f"batch {batch + 1} reads every other partition from there and {partition} from {to_offset}",
        f"Kafka must still hold offset {to_offset} of {partition} (else the next batch reports data loss)",
    ]
    what = f"{plural(count, 'offset')} of Kafka partition {partition} (up to offset {to_offset})"
    return what, notes


def _offsets_write(storage: CheckpointStorage, batch: int, lines: Mapping[int, str]) -> PlannedWrite:
    path = f"{OFFSETS_DIR}/{batch}"
    listing = {info.name: info for info in storage.list_dir(OFFSETS_DIR)}
    return PlannedWrite(
        path=path,
        inputs=(FileState(path, listing[str(batch)].size),),
        estimated_bytes=listing[str(batch)].size,
        reason=f"batch {batch} reads only what is skipped: source lines {sorted(lines)} rewritten",
        overwrite=True,
        hadoop_crc=directory_uses_hadoop_crc(listing),
    )


def _file_source_rewrite(
    storage: CheckpointStorage,
    source: int,
    offsets: tuple[OffsetSeq, OffsetSeq],
    files: Sequence[str],
    compact_interval: int,
) -> tuple[tuple[PlannedWrite, ...], str, list[str]]:
    """Split the log batch the uncommitted batch reads: the named files stay in it, the others move to
    the next log batch (the next batch reads them). Files stay logged, so FileStreamSource, which
    treats every logged file as seen, never reads the skipped ones."""
    log_batch, path, size, skipped, remaining = _split_log_batch(storage, source, *offsets, files)
    names = ", ".join(entry.path for entry in skipped)
    what = f"{plural(len(skipped), 'file')} of source {source}"
    notes = [f"skipped files (they stay in sources/{source}/{log_batch}, so Spark never reads them): {names}"]
    if not remaining:
        return (), what + " (every file of the batch)", notes
    next_path = _next_log_batch_path(storage, source, log_batch, (path, files), compact_interval)
    notes.append(f"{plural(len(remaining), 'other file')} of the batch move to {next_path}, read by the next batch")
    return _split_writes(storage, source, (path, size), next_path), what, notes


def _split_writes(
    storage: CheckpointStorage, source: int, log_file: tuple[str, int], next_path: str
) -> tuple[PlannedWrite, PlannedWrite]:
    """The next log batch (``next_path``) with the other files, then the log batch (path, size) without them."""
    path, size = log_file
    inputs = (FileState(path, size),)
    crc = directory_uses_hadoop_crc(listing_names(storage, f"sources/{source}"))
    return (
        PlannedWrite(next_path, inputs, size, "the batch's other files, for the next batch", hadoop_crc=crc),
        PlannedWrite(path, inputs, size, "the batch keeps only the skipped files", overwrite=True, hadoop_crc=crc),
    )


def _next_log_batch_path(
    storage: CheckpointStorage, source: int, log_batch: int, split: tuple[str, Sequence[str]], compact_interval: int
) -> str:
    """The log batch after ``log_batch``, where the other files move; refused where Spark would not read it so.

    ``split``: the path of ``log_batch`` and the files named to skip. The next log batch may exist only
    as an earlier application of this very split wrote it.
    """
    path, files = split
    listing = log_batch_files(storage.list_dir(f"sources/{source}"))
    next_path = f"sources/{source}/{log_batch + 1}"
    if is_compaction_batch(log_batch + 1, log_compact_interval(listing, compact_interval)):
        raise SkipRefused(f"{next_path} would be a compaction batch of sources/{source}; not supported")
    if log_batch + 1 in listing and storage.read_bytes(next_path) != _moved_lines_bytes(storage, path, files):
        raise SkipRefused(f"{next_path} exists already (a batch Spark began to plan); rewind or repair first")
    return next_path


def _split_log_batch(
    storage: CheckpointStorage, source: int, previous: OffsetSeq, current: OffsetSeq, files: Sequence[str]
) -> tuple[int, str, int, list[FileEntry], list[FileEntry]]:
    """The log batch the batch reads, its file and size, and its entries named and not named."""
    last = _only_log_batch_read(source, previous, current)
    found = source_log_file(storage, source, last)
    if found is None:
        raise SkipRefused(f"sources/{source}/{last} does not exist")
    entries = [e for e, _ in source_log_lines(storage.read_bytes(found[0]), source=found[0]) if e.batch_id == last]
    _check_named_files(files, entries, f"sources/{source}/{last}")
    skipped = [e for e in entries if _named(e, files)]
    kept = [e for e in entries if not _named(e, files)]
    return last, found[0], found[1], skipped, kept


def _check_named_files(files: Sequence[str], entries: Sequence[FileEntry], log_path: str) -> None:
    """Refuse a skip that names no file, or a file that is not among the ``entries`` the batch reads."""
    unknown = [name for name in files if not any(same_file(e.path, name) for e in entries)]
    if unknown or not files:
        raise SkipRefused(
            f"not among the {plural(len(entries), 'file')} the batch reads ({log_path}): "
            + (", ".join(unknown) or "no file named")
        )


def _only_log_batch_read(source: int, previous: OffsetSeq, current: OffsetSeq) -> int:
    """The one log batch of file source ``source`` the batch reads; refused when it reads several or none."""
    first, last = file_log_offset(previous.offsets[source]), file_log_offset(current.offsets[source])
    if first is None or last is None:
        raise SkipRefused(f'source {source} is not a file source (its offsets are not {{"logOffset":…}})')
    if last != first + 1:
        raise SkipRefused(
            f"the batch reads log batches {first + 1} to {last} of sources/{source}; only a batch that reads one "
            "log batch can be split"
        )
    return last


def _named(entry: FileEntry, files: Sequence[str]) -> bool:
    return any(same_file(entry.path, name) for name in files)


def listing_names(storage: CheckpointStorage, directory: str) -> set[str]:
    return {info.name for info in storage.list_dir(directory)}


def _moved_lines_bytes(storage: CheckpointStorage, log_path: str, files: Sequence[str]) -> bytes:
    """The next log batch: the not-named entries of the log batch in ``log_path``, renumbered."""
    log_batch = _log_batch_of(log_path)
    pairs = source_log_lines(storage.read_bytes(log_path), source=log_path)
    return source_log_bytes(
        [
            with_batch_id(line, log_batch + 1, source=log_path)
            for e, line in pairs
            if e.batch_id == log_batch and not _named(e, files)
        ]
    )


def _kept_lines_bytes(storage: CheckpointStorage, log_path: str, files: Sequence[str]) -> bytes:
    """The log batch in ``log_path`` without its not-named entries (earlier batches' entries of a
    compaction file stay)."""
    log_batch = _log_batch_of(log_path)
    pairs = source_log_lines(storage.read_bytes(log_path), source=log_path)
    return source_log_bytes([line for e, line in pairs if e.batch_id != log_batch or _named(e, files)])


def _log_batch_of(path: str) -> int:
    return int(posixpath.basename(path).removesuffix(COMPACT_FILE_SUFFIX))


def offsets_content(storage: CheckpointStorage, write: PlannedWrite, request: Mapping[str, Any]) -> bytes:
    """``offsets/N`` of a source skip, recomputed from the logs (the same after a killed run's rewrite)."""
    batch, source = int(posixpath.basename(write.path)), int(request["source"])
    current, previous = read_offset_seq(storage, batch), read_offset_seq(storage, batch - 1)
    lines = _other_sources_at_start(current, previous, source)
    if "files" not in request:
        _kafka_rewrite(batch, current, previous, request, lines)
    return rewrite_offset_lines(storage.read_bytes(write.path), lines, source=write.path)


def source_log_content(storage: CheckpointStorage, write: PlannedWrite, request: Mapping[str, Any]) -> bytes:
    log_path = write.inputs[0].path
    if write.path == log_path:
        return _kept_lines_bytes(storage, log_path, request["files"])
    return _moved_lines_bytes(storage, log_path, request["files"])
