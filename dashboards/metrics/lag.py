"""How far each source of the newest progress report was behind its head (workers/checkpoint/lag.py).

One query: the SourceLagMetrics rows of the newest BatchProgress of each checkpoint (found by
``read_checkpoints``) whose source reports its lag. A source that reports none (rate and file
sources) has no sample, not a zero: "not reported" is not "caught up".
"""

from __future__ import annotations

from collections.abc import Iterator

from dashboards.metrics.families import CheckpointLabels, add, gauge
from dashboards.metrics.progress import checkpoints_by_report
from dashboards.models import SourceLagMetrics

SOURCE_LABELS = ("source_index", "source")


def source_lag_families(rows: list[dict], labels: CheckpointLabels) -> Iterator:
    behind = gauge(
        "progress_source_offsets_behind",
        "Offsets at the source's head beyond the newest progress report's endOffset, in the source's own unit "
        "(Kafka: records, summed over partitions; from its avgOffsetsBehindLatest metric, else latestOffset "
        "minus endOffset). Only sources that report it.",
        SOURCE_LABELS,
    )
    checkpoints_of = checkpoints_by_report(rows)
    lags = SourceLagMetrics.objects.filter(progress_id__in=list(checkpoints_of), offsets_behind__isnull=False)
    for lag in lags.order_by("progress_id", "source_index").values(
        "progress_id", "source_index", "description", "offsets_behind"
    ):
        for pk in checkpoints_of[lag["progress_id"]]:
            add(behind, labels, pk, lag["offsets_behind"], str(lag["source_index"]), lag["description"])
    yield behind
