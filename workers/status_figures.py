"""The health model's figures of one checkpoint, brought up to date by every sync that stored something.

From the newest HISTORY_BATCHES batches (an index range of the unique (checkpoint, batch_id)) and
the progress of those same batch ids: the usual gap between batches, the trigger interval the
batches show (dashboards.health.query_status.learn_trigger_interval; kept from earlier syncs while the
batches show none, e.g. while they run back to back), and over the newest RECENT_BATCHES with
progress the median batch duration, the mean input and processed rates, and the offsets behind
the sources' heads at the newest and the oldest of them that report it.

Progress is matched by query id and batch id up to the checkpoint's own latest batch, so a copy
of a checkpoint (same query id, fewer batches) never takes the live query's newer figures.
"""

from __future__ import annotations

import statistics
from datetime import datetime

from dashboards.health.query_status import StatusFacts, learn_trigger_interval
from dashboards.models import BatchProgress, Checkpoint

HISTORY_BATCHES = 100
RECENT_BATCHES = 10
FIGURE_FIELDS = (
    "trigger_interval_ms",
    "typical_gap_ms",
    "recent_batch_duration_ms",
    "recent_input_rate",
    "recent_process_rate",
    "recent_offsets_behind",
    "earlier_offsets_behind",
    "status_figures_at",
)


def refresh_status_figures(checkpoint: Checkpoint, now: datetime) -> None:
    """Recompute the figures from the stored batches and progress, and save them."""
    batches = _newest_batches(checkpoint)
    progress = _progress_of(checkpoint, first_batch=batches[0][0]) if batches else []
    _set_rhythm_figures(checkpoint, batches, progress)
    recent = progress[-RECENT_BATCHES:]
    _set_recent_figures(checkpoint, recent)
    _set_lag_figures(checkpoint, recent)
    checkpoint.status_figures_at = now
    checkpoint.save(update_fields=list(FIGURE_FIELDS))


def _set_rhythm_figures(checkpoint: Checkpoint, batches: list[tuple[int, int]], progress: list[dict]) -> None:
    """The trigger interval the batches show (kept while they show none) and their usual gap."""
    starts = [timestamp_ms for _, timestamp_ms in batches]
    gaps = [(later - earlier) / 1000 for earlier, later in zip(starts, starts[1:], strict=False) if later > earlier > 0]
    durations = [row["batch_duration_ms"] / 1000 for row in progress if row["batch_duration_ms"] is not None]
    learned = learn_trigger_interval(gaps, durations)
    if learned is not None:
        checkpoint.trigger_interval_ms = round(learned * 1000)
    checkpoint.typical_gap_ms = round(statistics.median(gaps) * 1000) if gaps else None


def _set_recent_figures(checkpoint: Checkpoint, recent: list[dict]) -> None:
    """The median batch duration and the mean rates of the recent batches (rates of those with input)."""
    recent_durations = [row["batch_duration_ms"] for row in recent if row["batch_duration_ms"] is not None]
    checkpoint.recent_batch_duration_ms = round(statistics.median(recent_durations)) if recent_durations else None
    with_input = [row for row in recent if row["num_input_rows"]]
    checkpoint.recent_input_rate = _mean(row["input_rows_per_second"] for row in with_input)
    checkpoint.recent_process_rate = _mean(row["processed_rows_per_second"] for row in with_input)


def rhythm_of(checkpoint: Checkpoint) -> StatusFacts:
    """The health model's input as far as the query's rhythm goes (trigger, usual gap, usual batch
    duration), for the workers' own judgements of "a batch is due" and "a batch is overdue"."""
    return StatusFacts(
        trigger_interval_seconds=checkpoint.expected_trigger_seconds or _seconds(checkpoint.trigger_interval_ms),
        typical_gap_seconds=_seconds(checkpoint.typical_gap_ms),
        recent_batch_duration_seconds=_seconds(checkpoint.recent_batch_duration_ms),
    )


def _seconds(milliseconds: int | None) -> float | None:
    return None if milliseconds is None else milliseconds / 1000


def _newest_batches(checkpoint: Checkpoint) -> list[tuple[int, int]]:
    """(batch id, batchTimestampMs) of the newest HISTORY_BATCHES + 1 batches, oldest first."""
    newest = checkpoint.batches.order_by("-batch_id").values_list("batch_id", "timestamp_ms")[: HISTORY_BATCHES + 1]
    return list(newest)[::-1]


def _progress_of(checkpoint: Checkpoint, *, first_batch: int) -> list[dict]:
    if checkpoint.query_id is None:
        return []
    rows = BatchProgress.objects.filter(
        query_id=checkpoint.query_id, batch_id__gte=first_batch, batch_id__lte=checkpoint.latest_batch_id
    ).order_by("batch_id")
    return list(
        rows.values(
            "batch_duration_ms",
            "num_input_rows",
            "input_rows_per_second",
            "processed_rows_per_second",
            "offsets_behind",
        )
    )


def _set_lag_figures(checkpoint: Checkpoint, recent: list[dict]) -> None:
    """The offsets behind head at the newest and the oldest of the recent batches that report it."""
    lags = [row["offsets_behind"] for row in recent if row["offsets_behind"] is not None]
    checkpoint.recent_offsets_behind = lags[-1] if lags else None
    checkpoint.earlier_offsets_behind = lags[0] if lags else None


def _mean(values) -> float | None:
    present = [value for value in values if value is not None]
    return statistics.fmean(present) if present else None
