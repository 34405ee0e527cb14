"""Skip: mark an uncommitted batch done without running it, its state carried forward unchanged.

A batch that fails at every restart (a poison record, a UDF that throws on one row) is the
latest batch of the offset log without a commit: Spark runs it again at each restart with the
offsets of ``offsets/N``, from the end offsets of ``offsets/N-1``. Skipping it writes what a
successful run of a batch that read nothing would have left, so that Spark finds batch N
committed and plans batch N + 1 from the end offsets of ``offsets/N``: the records of batch N
are never processed.

What is written (batch N reads state version N and writes version N + 1):

* every HDFS-backed store: ``N+1.delta`` holding no record (the codec's stream of the int32 -1
  end mark, as HDFSBackedStateStoreProvider writes for a commit without changes), so version
  N + 1 loads as version N. A ``N+1.snapshot`` left by the failed run (Spark's maintenance may
  snapshot the newest version it holds) is rewritten with the rows of version N, since a
  snapshot shadows the delta of its version;
* every RocksDB store (checkpoint format 1): with changelog checkpointing (the store has
  changelogs) an empty ``N+1.changelog`` (format v1, the same bytes as an empty delta), and a
  ``N+1.zip`` the failed run uploaded is replaced by a copy of ``N.zip``; without changelogs a
  copy of ``N.zip`` as ``N+1.zip``: a zip names its SST files and carries no version, so the
  copy loads as version N. Checkpoint format 2 (unique ids in the commit log) is refused: the
  next commit would have to name ids of files Spark has not written;
* last, ``commits/N`` as CommitLog writes it (v1), its watermark carried from ``commits/N-1``
  (a batch that read nothing does not move the watermark). Writes go in plan order, so a run
  killed before the commit leaves a batch that is still uncommitted (Spark rewrites its state
  files when it runs it), and one killed after it leaves the skip complete.

Files a file source logged for batch N (``sources/<i>/<L>``) stay: FileStreamSource has seen
them and never reads them again. A file sink writes nothing for batch N (its ``_spark_metadata``
gets no entry for N; data files a failed task left are not in the log, so no reader sees them).
"""

from __future__ import annotations

import dataclasses
import functools
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from ..layout import COMMITS_DIR, OFFSETS_DIR
from ..logdir import read_commit, read_offset_seq
from ..metadatalog import DEFAULT_COMPACT_INTERVAL
from ..statesummary import StateConf, state_conf
from ..storage.checkpointstorage import CheckpointStorage
from .compactionfile import build_compaction_content
from .execute import AppliedPlan, StepHook, apply_plan
from .plan import FileState, MaintenancePlan, PlannedWrite
from .preconditions import DEFAULT_QUIET_SECONDS
from .skipbatch import commit_bytes, plan_skip_batch
from .skipsource import offsets_content, plan_skip_source, source_log_content
from .skipsurvey import ACTION, COMPACTIBLE_LOG_HEADER, NO_RECORDS, SINK_PREFIX, LogSettings
from .snapshot import build_snapshot_content, compress_state_content


def plan_skip(
    storage: CheckpointStorage,
    *,
    now: float,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
    batch: int | None = None,
    source: int | None = None,
    partition: str | None = None,
    to_offset: int | None = None,
    files: Sequence[str] | None = None,
    backup_dir: str | None = None,
    sink_storage: CheckpointStorage | None = None,
    compact_interval: int = DEFAULT_COMPACT_INTERVAL,
) -> MaintenancePlan:
    """Plan a skip: ``batch`` (skip a whole uncommitted batch), or part of ``source``: a Kafka
    ``partition`` ("<topic>-<p>") moved to ``to_offset``, or named file-source ``files``.

    ``sink_storage`` is the query's file sink (its output directory or its ``_spark_metadata``),
    when it has one: a skipped batch needs an empty entry in the sink's log. ``compact_interval`` is the
    configured ``fileSink``/``fileSource.log.compactInterval``, from which Spark derives a log's interval."""
    backup = {"backup_dir": backup_dir} if backup_dir is not None else {}
    logs = LogSettings(sink_storage, compact_interval)
    if batch is not None:
        return plan_skip_batch(storage, int(batch), now=now, quiet_seconds=quiet_seconds, parameters=backup, logs=logs)
    request = {**_source_request(source, partition, to_offset, files), **backup}
    return plan_skip_source(storage, request, now=now, quiet_seconds=quiet_seconds, logs=logs)


def _source_request(
    source: int | None, partition: str | None, to_offset: int | None, files: Sequence[str] | None
) -> dict[str, Any]:
    """The parameters of a source skip, checked for one of its two shapes (ints as ints: a form sends text)."""
    if source is None:
        raise ValueError("a skip names a batch, or a source with a partition and to_offset, or with files")
    if partition is not None and to_offset is not None and files is None:
        return {"source": int(source), "partition": str(partition), "to_offset": int(to_offset)}
    if files is not None and partition is None and to_offset is None:
        return {"source": int(source), "files": [str(name) for name in files]}
    raise ValueError("a source skip takes either partition and to_offset (Kafka) or files (file source)")


def build_skip_content(
    storage: CheckpointStorage, write: PlannedWrite, *, conf: StateConf, request: Mapping[str, Any]
) -> bytes:
    """The bytes of one planned write of a skip plan (``request``: the plan's parameters)."""
    name = posixpath.basename(write.path)
    directory = posixpath.dirname(write.path)
    if directory == COMMITS_DIR:
        previous = read_commit(storage, int(name) - 1) if write.inputs else None
        return commit_bytes(previous.next_batch_watermark_ms if previous is not None else 0)
    if directory == OFFSETS_DIR:
        return offsets_content(storage, write, request)
    if directory.startswith("sources/"):
        return source_log_content(storage, write, request)
    if name.endswith(".zip"):
        return storage.read_bytes(write.inputs[0].path, max_bytes=None)
    if name.endswith(".snapshot"):
        return build_snapshot_content(storage, write, conf=conf)
    return compress_state_content(NO_RECORDS, codec=conf.codec, source=write.path)


def apply_skip(
    storage: CheckpointStorage,
    plan: MaintenancePlan,
    *,
    sink_storage: CheckpointStorage | None = None,
    on_step: StepHook | None = None,
) -> AppliedPlan:
    """Write the files of a confirmed skip plan: the checkpoint's, then the file sink's log entry, then the
    commit. A run killed before the commit leaves the batch to run again, and Spark then finds the sink's
    entry and writes no output for it."""
    _check_skip_plan(plan, sink_storage)
    build = functools.partial(build_skip_content, conf=_conf_of(storage, plan), request=plan.parameters)

    def build_any(target: CheckpointStorage, write: PlannedWrite) -> bytes:
        return _sink_content(target, write) if write.path.startswith(SINK_PREFIX) else build(target, write)

    # One apply_plan call, so the run's backup manifest lists every file it writes (an undo then
    # removes the sink's entry and the commit too). The plan orders its writes: the checkpoint's,
    # the sink's log entry, the commit last.
    return apply_plan(storage, plan, build_any, on_step=on_step, sink_storage=sink_storage)


def _check_skip_plan(plan: MaintenancePlan, sink_storage: CheckpointStorage | None) -> None:
    if plan.action != ACTION:
        raise ValueError(f"not a skip plan: {plan.action!r}")
    if plan.deletes:
        raise ValueError("a skip plan deletes nothing; this one was not made by plan_skip")
    if any(w.path.startswith(SINK_PREFIX) for w in plan.writes) and sink_storage is None:
        raise ValueError("the plan writes the file sink's log, but no sink storage was given")


def _on_sink_storage(write: PlannedWrite) -> PlannedWrite:
    """A sink write with its paths relative to the sink's storage (the ``@sink/`` prefix dropped)."""
    inputs = tuple(FileState(i.path.removeprefix(SINK_PREFIX), i.size) for i in write.inputs)
    return dataclasses.replace(write, path=write.path.removeprefix(SINK_PREFIX), inputs=inputs)


def _sink_content(storage: CheckpointStorage, write: PlannedWrite) -> bytes:
    """An empty sink log batch, or a compaction file of the entries before it (``storage``: the sink's)."""
    write = _on_sink_storage(write)
    if not write.inputs:
        return COMPACTIBLE_LOG_HEADER
    return build_compaction_content(storage, write, kind="sink")


def _conf_of(storage: CheckpointStorage, plan: MaintenancePlan) -> StateConf:
    commit = next((w for w in plan.writes if posixpath.dirname(w.path) == COMMITS_DIR), None)
    if commit is None:
        return state_conf({})
    offsets = read_offset_seq(storage, int(posixpath.basename(commit.path)))
    return state_conf(offsets.metadata.conf if offsets.metadata else {})


__all__ = ["apply_skip", "build_skip_content", "plan_skip"]
