"""Repair: fix what makes Spark refuse to restart a query, from what the integrity check finds.

Each repairable finding maps to one repair, chosen by what Spark does at restart
(MicroBatchExecution.populateStartOffsets reads the latest ``offsets/L``, ``offsets/L-1`` and
the latest ``commits/C``; StreamExecution reads ``metadata``):

* the latest offsets file empty, truncated or unparsable (``log-file-empty``,
  ``log-file-incomplete``, ``file-corrupt`` on ``offsets/L``): it cannot be rebuilt (it holds the
  end offsets the batch was planned with), so it goes, with ``commits/L`` if there is one. Spark
  then resumes from batch L-1 and plans batch L again from the sources. A damaged ``offsets/L-1``
  (also read at restart) takes batch L with it the same way;
* a hole in the offset log below the latest batch (``offsets-gap`` that Spark refuses: "batch
  L-1 doesn't exist", SPARK-38033): every offsets file above the hole goes, and every commit from
  the hole on, so the log ends at the batch before the hole and Spark plans the batches after it
  again, as the SPARK-38033 answer does by hand;
* commit files beyond the latest offsets (``commit-without-offsets``): they go; Spark would fail
  when it commits the re-run batch over them;
* the latest commit file damaged: ``commits/C`` is ``v1`` and ``{"nextBatchWatermarkMs": W}``,
  and W is the ``batchWatermarkMs`` Spark wrote into ``offsets/C+1`` when it planned the next
  batch (the watermark does not move between a commit and the next planning). With that file
  readable and a ``v1`` commit log, the commit is rewritten. Otherwise it goes, with the
  uncommitted offsets after it, and Spark re-runs batch C with the same offsets (it loads state
  version C and writes C+1 again);
* a commit missing or empty below the latest (``commit-missing``, ``log-file-empty`` on an older
  commit): rewritten the same way from ``offsets/N+1``; Spark's restart does not need it, but
  rollbacks and readers of that batch do;
* ``metadata`` missing or unreadable: written as ``{"id":"<query id>"}`` when the query id is
  known (the ``query_id`` parameter: the dashboard's progress events or Spark's event log name it);
* temporary files of killed writers and Hadoop checksums of deleted files: deleted.

Checkpoint format 2 commits (``v2``, with state unique ids) cannot be derived and are never
rewritten. What the plan does not fix is said in its notes, finding by finding.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..commits import CommitMetadata
from ..errors import CheckpointError
from ..fileinfo import FileInfo
from ..integrity.checks import run_checks
from ..integrity.facts import CheckpointFacts
from ..integrity.findings import Finding
from ..integrity.gather import gather_facts
from ..layout import BACKUP_DIR, COMMITS_DIR, METADATA_FILE, OFFSETS_DIR, parse_batch_id
from ..logdir import read_commit, read_offset_seq
from ..offsets import OffsetSeq
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import plural
from .execute import AppliedPlan, PlanOutdatedError, StepHook, apply_plan
from .plan import FileState, MaintenancePlan, PlannedDelete, PlannedWrite, batch_span
from .planning import delete_with_sidecars, start_plan
from .preconditions import DEFAULT_QUIET_SECONDS
from .sidecars import directory_uses_hadoop_crc, hadoop_crc_name

ACTION = "repair"
# Finding codes of damage in a log file's content.
CONTENT_DAMAGE_CODES = frozenset({"log-file-empty", "log-file-incomplete", "file-corrupt"})
# Every finding code a repair may fix (``is_repairable`` also looks at the finding's file).
REPAIRABLE_CODES = CONTENT_DAMAGE_CODES | {
    "offsets-gap",
    "commit-without-offsets",
    "commit-missing",
    "metadata-missing",
    "temporary-file",
    "orphan-checksum",
}
LEFTOVER_CODES = frozenset({"temporary-file", "orphan-checksum"})
# The notes of a plan that makes Spark plan batches again ({batches}) or re-run one ({batch}).
_REPLANNED_NOTE = (
    "Spark plans {batches} again from the sources' current "
    "positions: the output may differ from the first attempt's. A file sink skips batch ids its log "
    "already holds; Kafka, a database or any sink that keeps no log receives them again, and what "
    "those batches already sent cannot be undone outside the checkpoint."
)
_RERUN_NOTE = (
    "Batch {batch} runs again: output it already sent to a sink that keeps no log (Kafka, a "
    "database) is sent twice; that cannot be undone outside the checkpoint."
)


def is_repairable(finding: Finding) -> bool:
    """Whether a repair plan addresses this finding (the plan may still say it cannot, and why).

    Pure, for the web side: a finding it answers True for links to the repair plan of its code.
    """
    if finding.code not in REPAIRABLE_CODES or "://" in finding.path:
        return False  # a sink log's files live outside the checkpoint
    if finding.path.startswith(f"{BACKUP_DIR}/"):  # the undo copies of earlier runs: never touched
        return False  # the copies an earlier run kept for undo are not the checkpoint's own files
    if finding.code in CONTENT_DAMAGE_CODES:
        located = _log_batch(finding.path)
        # An older offsets file cannot be rebuilt; the latest ones (errors) go, commits are rewritten.
        on_log = located is not None and (located[0] == COMMITS_DIR or finding.severity == "error")
        return finding.path == METADATA_FILE or on_log
    if finding.code == "offsets-gap":
        return finding.severity == "error"
    return finding.code != "metadata-missing" or finding.severity == "error"


def repairable_findings(findings: Iterable[Finding]) -> list[Finding]:
    """The findings a repair plan addresses (``is_repairable``)."""
    return [finding for finding in findings if is_repairable(finding)]


def plan_repair(
    storage: CheckpointStorage,
    *,
    now: float,
    damage: str | None = None,
    query_id: str | None = None,
    backup_dir: str | None = None,
    quiet_seconds: float = DEFAULT_QUIET_SECONDS,
) -> MaintenancePlan:
    """Run the integrity check and plan the repair of every repairable finding (or of ``damage``'s only).

    ``query_id`` is the query's id, needed only to write a missing ``metadata`` file.
    """
    if damage is not None and damage not in REPAIRABLE_CODES:
        raise ValueError(
            f"{damage!r} is no repairable finding code; expected one of {', '.join(sorted(REPAIRABLE_CODES))}"
        )
    if query_id is not None:
        _check_query_id(query_id)
    facts = gather_facts(storage)
    parameters = {"damage": damage, "query_id": query_id}
    if backup_dir is not None:
        parameters["backup_dir"] = backup_dir
    offsets, commits = (facts.listing.list_dir(directory) for directory in (OFFSETS_DIR, COMMITS_DIR))
    start = start_plan(ACTION, parameters, offsets, commits, now=now, quiet_seconds=quiet_seconds)
    findings = [f for f in run_checks(facts) if damage is None or f.code == damage]
    repairs = _Repairs(_Logs(storage, facts), query_id)
    repairs.plan(findings)
    return start.finish(
        writes=repairs.writes,
        deletes=repairs.deletes,
        summary=repairs.summary(),
        notes=repairs.notes(findings),
    )


def apply_repair(storage: CheckpointStorage, plan: MaintenancePlan, *, on_step: StepHook | None = None) -> AppliedPlan:
    """Apply a confirmed repair plan: rewritten commits and ``metadata`` first, then the deletes."""
    query_id = plan.parameters.get("query_id")

    def build(storage: CheckpointStorage, write: PlannedWrite) -> bytes:
        if write.path == METADATA_FILE:
            return metadata_bytes(str(query_id))
        # The commit's content is the watermark the next batch's offsets were planned with.
        _, following = _log_batch(write.inputs[0].path) or ("", -1)
        metadata = read_offset_seq(storage, following).metadata
        if metadata is None:
            raise PlanOutdatedError(write.inputs[0].path, "no longer carries the batch watermark")
        return commit_v1_bytes(metadata.batch_watermark_ms)

    return apply_plan(storage, plan, build, on_step=on_step)


def metadata_bytes(query_id: str) -> bytes:
    """The ``metadata`` file Spark writes (StreamMetadata): one JSON object, no trailing newline."""
    return json.dumps({"id": query_id}, separators=(",", ":")).encode()


def commit_v1_bytes(next_batch_watermark_ms: int) -> bytes:
    """A ``v1`` commit file as CommitLog writes it: the version line, then the JSON, no trailing newline."""
    return b"v1\n" + json.dumps({"nextBatchWatermarkMs": next_batch_watermark_ms}, separators=(",", ":")).encode()


def _check_query_id(query_id: str) -> None:
    try:
        uuid.UUID(query_id)
    except ValueError:
        raise ValueError(f"query_id must be the query's UUID (as StreamingQuery.id), not {query_id!r}") from None


def _log_batch(path: str) -> tuple[str, int] | None:
    """("offsets" or "commits", batch id) of a batch log file's path, else None."""
    directory, name = posixpath.split(path)
    batch_id = parse_batch_id(name)
    return (directory, batch_id) if directory in (OFFSETS_DIR, COMMITS_DIR) and batch_id is not None else None


class _Logs:
    """The offset and commit logs as listed by the check, with the few extra reads a repair needs."""

    def __init__(self, storage: CheckpointStorage, facts: CheckpointFacts) -> None:
        self.storage, self.facts = storage, facts
        self.files = {
            d: {i.name: i for i in facts.listing.list_dir(d) if not i.is_dir} for d in (OFFSETS_DIR, COMMITS_DIR)
        }
        self.root_names = {info.name for info in facts.listing.list_dir()}
        self._read: dict[str, Any] = {}

    def ids(self, directory: str) -> list[int]:
        return self.facts.offset_ids if directory == OFFSETS_DIR else self.facts.commit_ids

    def info(self, directory: str, batch_id: int) -> FileInfo:
        return self.files[directory][str(batch_id)]

    def offsets(self, batch_id: int) -> OffsetSeq | None:
        """``offsets/<batch_id>`` parsed, or None when it is absent or cannot be read."""
        return self._value(f"{OFFSETS_DIR}/{batch_id}", read_offset_seq, batch_id)

    def commit(self, batch_id: int) -> CommitMetadata | None:
        return self._value(f"{COMMITS_DIR}/{batch_id}", read_commit, batch_id)

    def was_read(self, path: str) -> bool:
        """Whether the integrity check read this file (its outcome is then a finding or a value)."""
        return any(read.path == path for read in self.facts.reads)

    def _value(self, path: str, read: Any, batch_id: int) -> Any:
        directory = path.split("/")[0]
        if str(batch_id) not in self.files[directory]:
            return None
        value = self.facts.value_of(path)
        if value is None and path not in self._read and not self.was_read(path):
            try:
                self._read[path] = read(self.storage, batch_id)
            except CheckpointError:
                self._read[path] = None
        return value if value is not None else self._read.get(path)


@dataclass
class _Repairs:
    """The repairs chosen so far: writes, deletes, the findings they fix and what cannot be fixed."""

    logs: _Logs
    query_id: str | None
    writes: list[PlannedWrite] = field(default_factory=list)
    deletes: list[PlannedDelete] = field(default_factory=list)
    fixed: set[tuple[str, str]] = field(default_factory=set)
    cannot: list[str] = field(default_factory=list)
    replanned: list[int] = field(default_factory=list)
    rerun: int | None = None

    def plan(self, findings: Sequence[Finding]) -> None:
        broken = {f.path for f in findings if f.code in CONTENT_DAMAGE_CODES and f.severity == "error"}
        self._cut_offsets_tail(findings, broken)
        self._repair_latest_commit(broken)
        self._rewrite_older_commits(findings)
        self._write_metadata(findings)
        self._delete_leftovers(findings)

    # -- the offset log's tail ------------------------------------------------------------------
    def _cut_offsets_tail(self, findings: Sequence[Finding], broken: set[str]) -> None:
        """Delete the offsets from the first batch Spark cannot resume through, and the commits from there."""
        offset_ids = self.logs.ids(OFFSETS_DIR)
        if not offset_ids:
            return
        cut = _first_batch_to_replan(findings, broken, offset_ids)
        if cut is None and any(f.code == "commit-without-offsets" for f in findings):
            cut = offset_ids[-1] + 1  # only the commits beyond the latest offsets go
        if cut is None or (cut <= offset_ids[-1] and not self._resumable_below(cut, offset_ids)):
            return
        self._mark_fixed(findings, cut)
        replanned, commits = {b for b in offset_ids if b >= cut}, {c for c in self.logs.ids(COMMITS_DIR) if c >= cut}
        self.replanned = list(range(cut, max(replanned | commits, default=cut - 1) + 1))
        # Newest batch first, its commit before its offsets: a run killed half-way leaves a shorter
        # log that the same repair, planned again, finishes.
        for batch_id in sorted(commits | replanned, reverse=True):
            if batch_id in commits:
                self._delete(COMMITS_DIR, batch_id, _commit_reason(batch_id, cut, offset_ids[-1]))
            if batch_id in replanned:
                self._delete(OFFSETS_DIR, batch_id, _offsets_reason(batch_id, cut, broken))

    def _resumable_below(self, cut: int, offset_ids: Sequence[int]) -> bool:
        """Whether Spark can resume from the newest batch below ``cut``: it and the one before it readable."""
        below = [b for b in offset_ids if b < cut]
        if not below:
            self.cannot.append(
                f"{OFFSETS_DIR}/: no batch is left below batch {cut} to resume from; "
                "the log was purged past the damage, only a new checkpoint (or the state reader) helps"
            )
            return False
        latest = below[-1]
        for batch_id in (latest, latest - 1) if latest > 0 else (latest,):
            if self.logs.offsets(batch_id) is None:
                self.cannot.append(
                    f"{OFFSETS_DIR}/{batch_id}: missing or unreadable, and Spark needs it to resume from batch "
                    f"{latest}; rewind to an earlier batch instead"
                )
                return False
        return True

    def _mark_fixed(self, findings: Sequence[Finding], cut: int) -> None:
        """Record the findings the cut at ``cut`` fixes: those about files from ``cut`` on, and the hole."""
        for finding in findings:
            located = _log_batch(finding.path)
            about_cut_files = located is not None and located[1] >= cut and finding.code in REPAIRABLE_CODES
            if about_cut_files or finding.code == "commit-without-offsets":
                self.fixed.add((finding.code, finding.path))
            if finding.code == "offsets-gap" and finding.severity == "error":
                self.fixed.add((finding.code, finding.path))

    # -- commits ----------------------------------------------------------------------------------
    def _repair_latest_commit(self, broken: set[str]) -> None:
        """Rewrite the latest commit if it is damaged and derivable, else delete it so Spark re-runs the batch."""
        commits = [c for c in self.logs.ids(COMMITS_DIR) if not self._deleting(COMMITS_DIR, c)]
        if not commits or not self._commit_damaged(commits[-1], broken):
            return
        latest = commits[-1]
        if self._rewrite_commit(latest, "it is damaged; Spark reads it at restart") or self._rerun(latest):
            self.fixed.update({(code, f"{COMMITS_DIR}/{latest}") for code in CONTENT_DAMAGE_CODES})

    def _rerun(self, batch_id: int) -> bool:
        """Delete ``commits/<batch_id>`` and the uncommitted offsets after it, so Spark re-runs the batch
        with its recorded offsets; False when Spark could not resume from it."""
        tail = [b for b in self.logs.ids(OFFSETS_DIR) if b > batch_id and not self._deleting(OFFSETS_DIR, b)]
        if tail and not self._resumable_below(tail[0], self.logs.ids(OFFSETS_DIR)):
            return False
        # The uncommitted offsets first (newest first), then the commit: each step leaves a log
        # that this repair, planned again, finishes.
        for later in reversed(tail):
            self._delete(
                OFFSETS_DIR, later, f"batch {later} was not committed; Spark plans it again after batch {batch_id}"
            )
        self._delete(
            COMMITS_DIR, batch_id, f"damaged and not derivable: Spark re-runs batch {batch_id} with its offsets"
        )
        self.replanned.extend(tail)
        self.rerun = batch_id
        return True

    def _commit_damaged(self, batch_id: int, broken: set[str]) -> bool:
        """Whether the commit Spark will read at restart is damaged: found so by the check, or, when
        the cut made an older commit the latest one, unreadable now."""
        path = f"{COMMITS_DIR}/{batch_id}"
        return path in broken or (not self.logs.was_read(path) and self.logs.commit(batch_id) is None)

    def _rewrite_older_commits(self, findings: Sequence[Finding]) -> None:
        for finding in findings:
            batch_id = self._commit_to_rewrite(finding)
            if batch_id is None:
                continue
            reason = "missing although later batches are committed" if finding.code == "commit-missing" else "empty"
            if self._rewrite_commit(batch_id, reason):
                self.fixed.add((finding.code, finding.path))

    def _commit_to_rewrite(self, finding: Finding) -> int | None:
        """The batch of the missing or empty commit ``finding`` names, unless fixed or deleted already."""
        located = _log_batch(finding.path)
        if finding.code not in ("commit-missing", "log-file-empty") or located is None:
            return None
        directory, batch_id = located
        if (
            directory != COMMITS_DIR
            or (finding.code, finding.path) in self.fixed
            or self._deleting(directory, batch_id)
        ):
            return None
        return batch_id

    def _rewrite_commit(self, batch_id: int, why: str) -> bool:
        """Plan ``commits/<batch_id>`` rebuilt from ``offsets/<batch_id + 1>``; False when it cannot be derived."""
        following = self.logs.offsets(batch_id + 1)
        if following is None or following.metadata is None or self._deleting(OFFSETS_DIR, batch_id + 1):
            return False
        if self._commit_log_version(batch_id) != 1:
            return False
        self.writes.append(self._rebuilt_commit(batch_id, following.metadata.batch_watermark_ms, why))
        return True

    def _rebuilt_commit(self, batch_id: int, watermark_ms: int, why: str) -> PlannedWrite:
        """The write of ``commits/<batch_id>`` as v1 with the watermark ``offsets/<batch_id + 1>`` records."""
        names = self.logs.files[COMMITS_DIR]
        return PlannedWrite(
            path=f"{COMMITS_DIR}/{batch_id}",
            inputs=(FileState(f"{OFFSETS_DIR}/{batch_id + 1}", self.logs.info(OFFSETS_DIR, batch_id + 1).size),),
            estimated_bytes=len(commit_v1_bytes(watermark_ms)),
            reason=f"{why}: rebuilt as v1 with nextBatchWatermarkMs={watermark_ms}, "
            f"the watermark offsets/{batch_id + 1} was planned with",
            overwrite=str(batch_id) in names,
            hadoop_crc=directory_uses_hadoop_crc(names),
        )

    def _commit_log_version(self, damaged: int) -> int | None:
        """The version of the commit log's other files: the nearest readable commit's."""
        for batch_id in sorted(self.logs.ids(COMMITS_DIR), key=lambda b: abs(b - damaged)):
            commit = self.logs.commit(batch_id) if batch_id != damaged else None
            if commit is not None:
                return commit.version
        # No other readable commit: the format is unknown, so nothing is rebuilt.
        return None

    # -- metadata and leftovers ---------------------------------------------------------------------
    def _write_metadata(self, findings: Sequence[Finding]) -> None:
        damaged = _metadata_damage(findings)
        if not damaged:
            return
        if self.query_id is None:
            self.cannot.append(
                f"{METADATA_FILE}: the query id is not known; plan again with the query's id "
                "(its progress events or Spark's event log name it)"
            )
            return
        self.writes.append(_metadata_write(self.query_id, self.logs.root_names))
        self.fixed.update((f.code, f.path) for f in damaged)

    def _delete_leftovers(self, findings: Sequence[Finding]) -> None:
        planned = {d.path for d in self.deletes}
        # A rewritten file gets a new checksum, which must not be deleted after it is written.
        planned.update(
            posixpath.join(posixpath.dirname(w.path), hadoop_crc_name(posixpath.basename(w.path))) for w in self.writes
        )
        for finding in findings:
            if finding.code in LEFTOVER_CODES and is_repairable(finding) and finding.path not in planned:
                self._delete_leftover(finding)

    def _delete_leftover(self, finding: Finding) -> None:
        """Delete the leftover file ``finding`` names, if it is still listed."""
        size = self._size(finding.path)
        if size is not None:
            self.deletes.append(PlannedDelete(finding.path, size, f"{_leftover_kind(finding)}; Spark never reads it"))
            self.fixed.add((finding.code, finding.path))

    # -- helpers --------------------------------------------------------------------------------
    def _size(self, path: str) -> int | None:
        directory, name = posixpath.split(path)
        info = next((i for i in self.logs.facts.listing.list_dir(directory) if i.name == name), None)
        return None if info is None else info.size

    def _deleting(self, directory: str, batch_id: int) -> bool:
        path = f"{directory}/{batch_id}"
        return any(d.path == path for d in self.deletes)

    def _delete(self, directory: str, batch_id: int, reason: str) -> None:
        files = self.logs.files[directory]
        self.deletes.extend(
            delete_with_sidecars(
                directory, str(batch_id), files, reason, sidecar_reason=f"checksum of {directory}/{batch_id}"
            )
        )

    # -- the plan's words ---------------------------------------------------------------------------
    def summary(self) -> str:
        if not self.writes and not self.deletes:
            return "nothing to repair" + (": " + "; ".join(self.cannot) if self.cannot else "")
        parts = []
        if self.replanned:
            parts.append(f"Spark plans {batch_span(min(self.replanned), max(self.replanned))} again")
        if self.rerun is not None:
            parts.append(f"Spark re-runs batch {self.rerun} with its recorded offsets")
        counts = ((self.writes, "rewritten"), (self.deletes, "deleted"))
        parts.append(", ".join(f"{plural(len(files), 'file')} {done}" for files, done in counts if files))
        return "; ".join(parts)

    def notes(self, findings: Sequence[Finding]) -> tuple[str, ...]:
        notes = list(self.cannot)
        if self.replanned:
            notes.append(_REPLANNED_NOTE.format(batches=batch_span(min(self.replanned), max(self.replanned))))
        if self.rerun is not None:
            notes.append(_RERUN_NOTE.format(batch=self.rerun))
        for finding in findings:
            if finding.severity != "info" and (finding.code, finding.path) not in self.fixed:
                notes.append(f"not repaired: {finding.code} {finding.path}: {finding.message}")
        return tuple(notes)


def _metadata_damage(findings: Sequence[Finding]) -> list[Finding]:
    """The errors that say the ``metadata`` file is missing or damaged."""
    return [
        f
        for f in findings
        if f.path == METADATA_FILE
        and f.severity == "error"
        and (f.code in CONTENT_DAMAGE_CODES or f.code == "metadata-missing")
    ]


def _metadata_write(query_id: str, root_names: Collection[str]) -> PlannedWrite:
    """The write of the ``metadata`` file with ``query_id`` (``root_names``: the checkpoint's files)."""
    exists = METADATA_FILE in root_names
    return PlannedWrite(
        path=METADATA_FILE,
        inputs=(),
        estimated_bytes=len(metadata_bytes(query_id)),
        reason=f"{'damaged' if exists else 'missing'}: written with the query id {query_id}",
        overwrite=exists,
        hadoop_crc=directory_uses_hadoop_crc(root_names),
    )


def _leftover_kind(finding: Finding) -> str:
    return "temporary file of a killed writer" if finding.code == "temporary-file" else "checksum of a deleted file"


def _first_batch_to_replan(findings: Sequence[Finding], broken: set[str], offset_ids: Sequence[int]) -> int | None:
    """The lowest batch from which the offset log must go: a damaged offsets file Spark reads at
    restart (the latest or the one before it), or a hole Spark refuses."""
    cuts = [located[1] for located in map(_log_batch, broken) if located is not None and located[0] == OFFSETS_DIR]
    for finding in findings:
        if finding.code == "offsets-gap" and finding.severity == "error":
            first_missing = _log_batch(finding.path)
            if first_missing is not None:
                cuts.append(first_missing[1])
    return min(cuts, default=None)


def _offsets_reason(batch_id: int, cut: int, broken: set[str]) -> str:
    if f"{OFFSETS_DIR}/{batch_id}" in broken:
        return f"damaged offsets of batch {batch_id}, read at restart: cannot be rebuilt; Spark plans the batch again"
    return (
        f"Spark cannot resume past batch {cut - 1} (damage or a hole from batch {cut} on), "
        f"so it plans batch {batch_id} again"
    )


def _commit_reason(batch_id: int, cut: int, latest_offsets: int) -> str:
    if batch_id > latest_offsets:
        return f"commit of batch {batch_id}, which has no offsets: Spark would fail when it commits the re-run batch"
    return f"commit of batch {batch_id}: Spark cannot resume past batch {cut - 1}, so it plans batch {batch_id} again"
