"""What the Runtime charts draw, one record per batch: its progress, a stateful operator's figures,
a source's lag behind its head. runtime_series.py reads them from the store.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass

SOURCE_LABEL_CHARS = 48  # a source's description in a legend (a file source's is its whole path)


@dataclass(frozen=True, slots=True)
class ProgressPoint:
    """One batch's query-wide figures (rates are sums over the sources)."""

    batch_id: int
    timestamp_ms: int
    input_rows_per_second: float | None
    processed_rows_per_second: float | None
    num_input_rows: int | None
    batch_duration_ms: int | None
    duration_ms: Mapping[str, int]
    watermark_gap_ms: int | None  # batch start minus the watermark; None before the first watermark


@dataclass(frozen=True, slots=True)
class OperatorPoint:
    """One stateful operator's figures in one batch (StateOperatorProgress)."""

    batch_id: int
    timestamp_ms: int
    operator_index: int
    operator_name: str
    num_rows_total: int | None
    num_rows_updated: int | None
    num_rows_removed: int | None
    num_rows_dropped_by_watermark: int | None
    memory_used_bytes: int | None
    cache_hit_ratio: float | None

    @property
    def label(self) -> str:
        return (
            f"{self.operator_index}: {self.operator_name}" if self.operator_name else f"operator {self.operator_index}"
        )


@dataclass(frozen=True, slots=True)
class LagPoint:
    """How far one source was behind its head after one batch (SourceLagMetrics), in its own offsets."""

    batch_id: int
    timestamp_ms: int
    source_index: int
    description: str
    offsets_behind: int | None

    @property
    def label(self) -> str:
        name = textwrap.shorten(self.description, SOURCE_LABEL_CHARS, placeholder="…") if self.description else ""
        return f"{self.source_index}: {name}" if name else f"source {self.source_index}"
