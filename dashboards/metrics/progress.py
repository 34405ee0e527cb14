"""Runtime families from the newest StreamingQueryProgress of each checkpoint's query.

Two queries: the newest BatchProgress rows by primary key (found by ``read_checkpoints``), and
their StateOperatorMetrics rows. Operators are summed per checkpoint unless ``per_operator`` is
set, which adds the labels ``operator_index`` (position in stateOperators) and ``operator_name``.
"""

from __future__ import annotations

from collections.abc import Iterator

from dashboards.metrics.families import CheckpointLabels, add, counter, duration_ms_to_seconds, gauge, seconds
from dashboards.models import CACHE_HITS, CACHE_MISSES, BatchProgress, StateOperatorMetrics

OPERATOR_LABELS = ("operator_index", "operator_name")


def progress_families(rows: list[dict], labels: CheckpointLabels, *, per_operator: bool) -> Iterator:
    checkpoints_of = checkpoints_by_report(rows)
    yield from _batch_families(checkpoints_of, labels)
    yield from _operator_families(checkpoints_of, labels, per_operator)


def checkpoints_by_report(rows: list[dict]) -> dict[int, list[int]]:
    """Newest BatchProgress pk -> the checkpoints whose newest report it is.

    Progress belongs to a query: a checkpoint copied elsewhere keeps its query id, so two
    checkpoints may share one report.
    """
    checkpoints_of: dict[int, list[int]] = {}
    for row in rows:
        if row["progress_pk"]:
            checkpoints_of.setdefault(row["progress_pk"], []).append(row["pk"])
    return checkpoints_of


_ABOUT = " of the newest progress report (StreamingQueryProgress)."
# BatchProgress column -> (family name, documentation); all gauges.
BATCH_GAUGES = {
    "batch_id": ("progress_batch_id", "batchId" + _ABOUT),
    "timestamp": ("progress_timestamp_seconds", "Trigger start (timestamp)" + _ABOUT.rstrip(".") + ", Unix seconds."),
    "batch_duration_ms": ("progress_batch_duration_seconds", "batchDuration" + _ABOUT),
    "num_input_rows": ("progress_input_rows", "numInputRows" + _ABOUT),
    "input_rows_per_second": ("progress_input_rows_per_second", "inputRowsPerSecond" + _ABOUT),
    "processed_rows_per_second": ("progress_processed_rows_per_second", "processedRowsPerSecond" + _ABOUT),
}
# The columns whose sample is not the stored value itself.
BATCH_CONVERSIONS = {"timestamp": seconds, "batch_duration_ms": duration_ms_to_seconds}


def _batch_families(checkpoints_of: dict[int, list[int]], labels: CheckpointLabels) -> Iterator:
    families = {column: gauge(name, documentation) for column, (name, documentation) in BATCH_GAUGES.items()}
    reports = BatchProgress.objects.filter(pk__in=list(checkpoints_of)).values("pk", *BATCH_GAUGES)
    for report, pk in ((row, pk) for row in reports for pk in checkpoints_of[row["pk"]]):
        for column, family in families.items():
            add(family, labels, pk, _batch_sample(column, report[column]))
    yield from families.values()


def _batch_sample(column: str, value):
    """The sample of a BatchProgress column: Unix seconds for the time and the duration, else the value."""
    convert = BATCH_CONVERSIONS.get(column)
    return value if convert is None else convert(value)


# StateOperatorMetrics column -> (family name, Spark's field); all gauges.
OPERATOR_GAUGES = {
    "num_rows_total": ("state_operator_rows", "numRowsTotal"),
    "num_rows_updated": ("state_operator_rows_updated", "numRowsUpdated"),
    "num_rows_dropped_by_watermark": ("state_operator_rows_dropped_by_watermark", "numRowsDroppedByWatermark"),
    "memory_used_bytes": ("state_operator_memory_used_bytes", "memoryUsedBytes"),
}
# Custom metrics of HDFSBackedStateStoreProvider: cumulative per provider instance, so counters
# (they restart from 0 with the executor, which Prometheus reads as a counter reset).
OPERATOR_COUNTERS = {
    CACHE_HITS: ("state_operator_cache_hits", "state loads served from the HDFS provider's cache of recent versions"),
    CACHE_MISSES: ("state_operator_cache_misses", "state loads the HDFS provider had to read from files"),
}


def _operator_families(checkpoints_of: dict[int, list[int]], labels: CheckpointLabels, per_operator: bool) -> Iterator:
    families = _operator_family_set(per_operator)
    for (pk, *extra_values), figures in _operator_totals(checkpoints_of, per_operator).items():
        for name, family in families.items():
            add(family, labels, pk, figures.get(name), *extra_values)
    yield from families.values()


def _operator_family_set(per_operator: bool) -> dict:
    """Column or custom metric -> its empty family, with the operator labels when ``per_operator``."""
    extra = OPERATOR_LABELS if per_operator else ()
    scope = "per operator" if per_operator else "summed over operators"
    return {
        column: gauge(name, f"{field} in the newest progress report (StateOperatorProgress, {scope}).", extra)
        for column, (name, field) in OPERATOR_GAUGES.items()
    } | {
        metric: counter(name, f"{metric}: {meaning}, in the newest progress report ({scope}).", extra)
        for metric, (name, meaning) in OPERATOR_COUNTERS.items()
    }


def _operator_totals(checkpoints_of: dict[int, list[int]], per_operator: bool) -> dict[tuple, dict[str, int]]:
    """(checkpoint pk, and the operator's labels when ``per_operator``) -> its figures, summed."""
    totals: dict[tuple, dict[str, int]] = {}
    operators = StateOperatorMetrics.objects.filter(progress_id__in=list(checkpoints_of)).order_by(
        "progress_id", "operator_index"
    )
    for operator in operators.values(
        "progress_id", "operator_index", "operator_name", "custom_metrics", *OPERATOR_GAUGES
    ):
        figures = {column: operator[column] for column in OPERATOR_GAUGES}
        figures |= {metric: operator["custom_metrics"].get(metric) for metric in OPERATOR_COUNTERS}
        operator_labels = (str(operator["operator_index"]), operator["operator_name"]) if per_operator else ()
        for pk in checkpoints_of[operator["progress_id"]]:
            _accumulate(totals.setdefault((pk, *operator_labels), {}), figures)
    return totals


def _accumulate(into: dict[str, int], figures: dict[str, int | None]) -> None:
    """Sum figures into ``into``; a figure no operator reported stays absent (RocksDB has no cache counts)."""
    for name, value in figures.items():
        if value is not None:
            into[name] = into.get(name, 0) + value
