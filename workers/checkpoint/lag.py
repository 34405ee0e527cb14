"""How far a source is behind its head after a trigger, from its SourceProgress.

Spark reports the head of a source as ``latestOffset`` (SupportsAdmissionControl's
``reportLatestOffset``: Kafka, Python data sources from 4.2; null for the rate, rate-per-micro-batch
and file sources of 4.3) and, for Kafka, per-partition figures in ``metrics``
(KafkaMicroBatchStream.metrics and KafkaSource: ``minOffsetsBehindLatest``,
``maxOffsetsBehindLatest``, ``avgOffsetsBehindLatest``, the latest available offset minus the
consumed one over the partitions of ``latestOffset``). The figure kept here is the total: offsets
waiting at the head, summed over the partitions, in the source's own offset unit (records for
Kafka, log entries for the file source). Where neither is reported, or the offsets cannot be
compared as numbers, the figure is None and the basis says "not reported".
"""

from __future__ import annotations

import enum
import json
import math
import reprlib
from dataclasses import dataclass
from typing import Any

from .logfile import JsonSite

KAFKA_AVG_BEHIND = "avgOffsetsBehindLatest"
# FileStreamSourceOffset's one field: the batch id of the file source's log (sources/N).
FILE_SOURCE_OFFSET_KEY = "logOffset"


class LagBasis(enum.StrEnum):
    """Which of Spark's figures a lag was derived from."""

    KAFKA_METRICS = "kafka-metrics"
    OFFSETS = "offsets"
    NOT_REPORTED = "not-reported"


@dataclass(frozen=True, slots=True)
class SourceLag:
    """Offsets a source has at its head beyond the trigger's end offset; None when not reported."""

    offsets_behind: int | None
    basis: LagBasis


NOT_REPORTED = SourceLag(None, LagBasis.NOT_REPORTED)


def source_lag(latest_offset: str | None, end_offset: str | None, metrics: dict[str, str], site: JsonSite) -> SourceLag:
    """Derive a source's lag from its offsets (compact JSON text) and metrics.

    Raises CorruptFileError (through ``site``) when avgOffsetsBehindLatest is not a number.
    """
    latest, end = _json_or_none(latest_offset), _json_or_none(end_offset)
    if KAFKA_AVG_BEHIND in metrics:
        partitions = _partition_offsets(latest) or _partition_offsets(end)
        if partitions:
            average = _metric_number(metrics, KAFKA_AVG_BEHIND, site)
            return SourceLag(round(average * len(partitions)), LagBasis.KAFKA_METRICS)
    behind = _offsets_behind(latest, end)
    return NOT_REPORTED if behind is None else SourceLag(behind, LagBasis.OFFSETS)


def _offsets_behind(latest: Any, end: Any) -> int | None:
    """latestOffset − endOffset where both are numbers of the same kind; None otherwise."""
    latest_partitions, end_partitions = _partition_offsets(latest), _partition_offsets(end)
    if latest_partitions is not None and end_partitions is not None:
        # A partition the trigger has not read yet (new since the end offset) has no end to compare.
        # Latest can trail the end by a fetch race; a source is never behind by less than nothing.
        shared = latest_partitions.keys() & end_partitions.keys()
        return sum(max(0, latest_partitions[key] - end_partitions[key]) for key in shared) if shared else None
    if isinstance(latest, dict) and isinstance(end, dict):
        latest, end = latest.get(FILE_SOURCE_OFFSET_KEY), end.get(FILE_SOURCE_OFFSET_KEY)
    if _is_long(latest) and _is_long(end):
        return max(0, latest - end)  # LongOffset (memory, socket sources), FileStreamSourceOffset
    return None


def _partition_offsets(value: Any) -> dict[tuple[str, str], int] | None:
    """A KafkaSourceOffset's {topic: {partition: offset}} as (topic, partition) -> offset; None for another shape."""
    if not isinstance(value, dict) or not value:
        return None
    offsets = {}
    for topic, partitions in value.items():
        if not isinstance(partitions, dict) or not partitions:
            return None
        for partition, offset in partitions.items():
            if not _is_long(offset):
                return None
            offsets[(topic, partition)] = offset
    return offsets


def _metric_number(metrics: dict[str, str], key: str, site: JsonSite) -> float:
    """A metric Spark writes with Scala's toString of a Double (``"12.5"``, ``"NaN"`` never for Kafka)."""
    try:
        number = float(metrics[key])
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise site.error(f"metrics.{key} must be a finite number of offsets, found {reprlib.repr(metrics[key])}")
    return number


def _json_or_none(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None  # an offset Spark could not parse is kept as plain text: nothing to compare


def _is_long(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
