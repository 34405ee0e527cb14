"""Checks of the batch logs, ``offsets/`` and ``commits/``: gaps, uncommitted batches, commits without offsets.

Codes: offsets-gap, batch-uncommitted, uncommitted-batches, no-commit-log, commit-missing,
commit-without-offsets.
They need only the listed batch ids, which is why they take those and not the whole facts.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..layout import COMMITS_DIR, OFFSETS_DIR
from .findings import Finding


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


def check_uncommitted(
    offset_ids: Sequence[int], commit_ids: Sequence[int], *, predates_commit_log: bool = False
) -> Iterator[Finding]:
    """Batches with offsets but no commit: one after the latest commit is normal, more is not,
    unless Spark 2.1 or earlier wrote the checkpoint (CheckpointFacts.predates_commit_log)."""
    if not offset_ids:
        return
    latest = offset_ids[-1]
    beyond = [b for b in offset_ids if not commit_ids or b > commit_ids[-1]]
    if beyond == [latest]:
        yield Finding(
            "info",
            "batch-uncommitted",
            f"{OFFSETS_DIR}/{latest}",
            f"batch {latest} was planned but has no commit",
            f"Spark re-runs batch {latest} with the same offsets.",
        )
    elif len(beyond) > 1 and predates_commit_log:
        yield _no_commit_log(latest)
    elif len(beyond) > 1:
        yield _uncommitted_batches(beyond, commit_ids)
    yield from _missing_commits(offset_ids, commit_ids)


def _missing_commits(offset_ids: Sequence[int], commit_ids: Sequence[int]) -> Iterator[Finding]:
    """The batches with offsets but no commit between the first and the latest commit."""
    committed = set(commit_ids)
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


def _no_commit_log(latest: int) -> Finding:
    # MicroBatchExecution.populateStartOffsets: with no commit log ("no commit log present"),
    # the batches before the latest count as done; it writes commits/ from the re-run on.
    return Finding(
        "info",
        "no-commit-log",
        COMMITS_DIR,
        f"there is no {COMMITS_DIR}/ directory and the offsets carry no SQL conf: Spark 2.1 or earlier "
        "wrote this checkpoint, and kept no commit log",
        f"Spark treats {_batch_range(0, latest - 1)} as done and re-runs batch {latest} from the offsets of "
        f"batch {latest - 1}; it writes {COMMITS_DIR}/ from then on.",
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
