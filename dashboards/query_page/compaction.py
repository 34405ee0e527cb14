"""When will a compaction batch take longer than the trigger interval? A pure projection.

Every compaction of a file source or file sink log rewrites all live entries into one
``N.compact`` file, so that batch's extra work grows with the file. We fit the sizes of the
compact files seen so far (bytes against batch id, least squares), and find the batch at which the
projected size would need more than one trigger interval to write at ``bytes_per_second`` (an
assumed compaction throughput, CKPTWEB_COMPACTION_BYTES_PER_SECOND, since no progress metric
times the compaction itself).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class CompactionOutlook:
    """The fitted growth (bytes = intercept + bytes_per_batch * batch id) and where it crosses the threshold."""

    bytes_per_batch: float
    intercept_bytes: float
    threshold_bytes: int
    crossing_batch_id: int | None
    time_to_crossing: timedelta | None


def median_trigger_seconds(timestamps_ms: Sequence[int]) -> float | None:
    """The median gap between consecutive batch start times (timestamps of 0 are unknown)."""
    known = sorted(t for t in timestamps_ms if t > 0)
    gaps = [(later - earlier) / 1000 for earlier, later in zip(known, known[1:], strict=False) if later > earlier]
    return statistics.median(gaps) if gaps else None


def project_compaction(
    sizes: Sequence[tuple[int, int]],
    *,
    latest_batch_id: int,
    trigger_seconds: float,
    bytes_per_second: float,
) -> CompactionOutlook | None:
    """Fit (batch id, bytes) of the compact files; None with fewer than two of them."""
    if len(sizes) < 2 or trigger_seconds <= 0 or bytes_per_second <= 0:
        return None
    slope, intercept = _least_squares(sizes)
    threshold = int(trigger_seconds * bytes_per_second)
    if slope <= 0:
        return CompactionOutlook(slope, intercept, threshold, None, None)
    crossing = max(math.ceil((threshold - intercept) / slope), latest_batch_id)
    return CompactionOutlook(
        bytes_per_batch=slope,
        intercept_bytes=intercept,
        threshold_bytes=threshold,
        crossing_batch_id=crossing,
        time_to_crossing=timedelta(seconds=(crossing - latest_batch_id) * trigger_seconds),
    )


def _least_squares(points: Sequence[tuple[int, int]]) -> tuple[float, float]:
    xs = [float(x) for x, _ in points]
    ys = [float(y) for _, y in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return 0.0, mean_y
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return slope, mean_y - slope * mean_x
