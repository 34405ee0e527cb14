"""Findings about the newest batch while it may still be running: they wait until it is overdue.

Spark writes ``offsets/N`` when it plans batch N and ``commits/N`` when the batch ends
(MicroBatchExecution). In between, a running batch looks exactly like one whose query died in
it, so an inspection taken then would report "batch N was planned but has no commit" about a
healthy query. These findings are held back while the batch is younger than the caller's
``overdue_after_seconds`` (the health model's stall time, from the query's own rhythm); once
the batch is committed they are not found at all, and once it is overdue they are reported.

Only the batch-log findings of the uncommitted tail wait. Missing state is never a sign of a
running batch: a batch writes the version after the one a restart loads, and the state of
version 0 (batch 0's start) is empty whatever the directories hold (``state.check_state``).
"""

from __future__ import annotations

from collections.abc import Iterable

from ..layout import OFFSETS_DIR
from ..offsets import OffsetSeq
from .facts import CheckpointFacts
from .findings import Finding

# The codes that describe the uncommitted tail of the batch logs, which a running batch is.
RUNNING_BATCH_CODES = frozenset({"batch-uncommitted", "uncommitted-batches"})


def hold_back_running_batch(
    findings: Iterable[Finding], facts: CheckpointFacts, *, now: float, overdue_after_seconds: float
) -> list[Finding]:
    """Drop the findings about the newest batch while it is uncommitted and not yet overdue.

    ``now`` is in epoch seconds. A newest batch whose offsets could not be read (no planning
    time) is never held back: its findings are reported at once.
    """
    planned_at = _planned_at_of_running_batch(facts)
    if planned_at is None or now - planned_at > overdue_after_seconds:
        return list(findings)
    return [finding for finding in findings if finding.code not in RUNNING_BATCH_CODES]


def _planned_at_of_running_batch(facts: CheckpointFacts) -> float | None:
    """When the newest batch was planned (epoch seconds), if it has no commit; else None."""
    offset_ids, commit_ids = facts.offset_ids, facts.commit_ids
    if not offset_ids or (commit_ids and commit_ids[-1] >= offset_ids[-1]):
        return None
    offsets = facts.value_of(f"{OFFSETS_DIR}/{offset_ids[-1]}")
    if not isinstance(offsets, OffsetSeq) or offsets.metadata is None or not offsets.metadata.batch_timestamp_ms:
        return None
    return offsets.metadata.batch_timestamp_ms / 1000
