"""Building blocks of the /metrics families: the per-checkpoint labels and typed constructors.

Every per-checkpoint family carries the same three labels (checkpoint name, query id, query name),
looked up in one ``CheckpointLabels`` map built from the first query of a scrape. Families that
would add unbounded labels (partitions, files, batches) do not exist; per-operator labels are an
opt-in (``CKPTWEB_METRICS_PER_OPERATOR``).
"""

from __future__ import annotations

from datetime import datetime

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

CHECKPOINT_LABELS = ("checkpoint", "query_id", "query_name")
PREFIX = "ckptweb_"

# checkpoint primary key -> (checkpoint name, query id, query name) label values
CheckpointLabels = dict[int, tuple[str, str, str]]


def gauge(name: str, documentation: str, extra_labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
    """A per-checkpoint gauge ``ckptweb_<name>``."""
    return GaugeMetricFamily(PREFIX + name, documentation, labels=[*CHECKPOINT_LABELS, *extra_labels])


def counter(name: str, documentation: str, extra_labels: tuple[str, ...] = ()) -> CounterMetricFamily:
    """A per-checkpoint counter ``ckptweb_<name>_total`` (pass the name without ``_total``)."""
    return CounterMetricFamily(PREFIX + name, documentation, labels=[*CHECKPOINT_LABELS, *extra_labels])


def add(family, labels: CheckpointLabels, checkpoint_id: int, value, *extra: str) -> None:
    """Add one sample for a checkpoint; a value of None (not known yet) adds none.

    A missing sample, not a zero, is what an unknown figure should look like: a zero timestamp
    would make ``time() - x`` fire every staleness alert.
    """
    if value is None or checkpoint_id not in labels:
        return
    family.add_metric([*labels[checkpoint_id], *extra], float(value))


def seconds(moment: datetime | None) -> float | None:
    """Unix time in seconds of an aware datetime, None for None."""
    return None if moment is None else moment.timestamp()


def epoch_ms_to_seconds(value_ms: int | None) -> float | None:
    """Spark's epoch milliseconds as Unix seconds; 0 (Spark's "not set") and None give None."""
    return value_ms / 1000 if value_ms else None


def duration_ms_to_seconds(value_ms: int | None) -> float | None:
    return None if value_ms is None else value_ms / 1000
