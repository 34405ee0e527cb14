"""The Runtime charts of a stateful query's state, per operator as Spark reports them: rows, rows
updated, removed and dropped by the watermark, memory, and the cache hit ratio.
"""

from __future__ import annotations

from collections.abc import Sequence

from dashboards.query_page.chart_units import (
    SERIES_DASHES,
    Figure,
    SizeUnit,
)
from dashboards.query_page.runtime_figure_parts import (
    counted,
    line_trace,
    longest,
    per_series_figure,
    sentence_figure,
    traces_figure,
)
from dashboards.query_page.runtime_points import OperatorPoint
from workers.checkpoint.wording import format_size


def state_figures(operators: Sequence[OperatorPoint]) -> dict[str, Figure]:
    by_operator: dict[str, list[OperatorPoint]] = {}
    for point in operators:
        by_operator.setdefault(point.label, []).append(point)
    series = sorted(by_operator.items())
    figures = {
        "state-rows": counted(per_series_figure(series, lambda p: p.num_rows_total, "rows", ",d")),
        "state-changes": counted(_state_changes_figure(series)),
        "state-memory": _state_memory_figure(series, operators),
        "state-cache": per_series_figure(series, lambda p: p.cache_hit_ratio, "hit ratio", ".1%"),
    }
    if all(p.cache_hit_ratio is None for p in operators):
        figures["state-cache"] = sentence_figure(
            "No cache lookups reported: only the HDFS state store provider reports "
            "loadedMapCacheHitCount and loadedMapCacheMissCount."
        )
    else:
        figures["state-cache"]["layout"]["yaxis"].update(range=[0, 1.05], tickformat=".0%")
    return figures


def _state_memory_figure(series, operators: Sequence[OperatorPoint]) -> Figure:
    """Memory in the unit its largest value reaches; each hover as people write a size ("4.2 KB")."""
    unit = SizeUnit.for_largest(longest(p.memory_used_bytes for p in operators))
    figure = per_series_figure(
        series, lambda p: None if p.memory_used_bytes is None else p.memory_used_bytes / unit.bytes, unit.name, ""
    )
    for trace in figure["data"]:
        trace["text"] = [format_size(y * unit.bytes) for y in trace["y"]]
        trace["hovertemplate"] = f"%{{text}} · batch %{{customdata}}<extra>{trace['name']}</extra>"
    return figure


STATE_CHANGES = (
    ("updated", "#2b7bb9", lambda p: p.num_rows_updated),
    ("removed", "#d9534f", lambda p: p.num_rows_removed),
    ("dropped by watermark", "#e08a00", lambda p: p.num_rows_dropped_by_watermark),
)


def _state_changes_figure(series) -> Figure:
    """Colour says the change, the dash says the operator (most queries have one)."""
    traces = []
    for index, (label, points) in enumerate(series):
        for change, colour, value in STATE_CHANGES:
            trace = line_trace(
                points,
                value,
                name=change if len(series) == 1 else f"{label} {change}",
                colour=colour,
                unit="rows",
                number_format=",d",
            )
            trace["line"]["dash"] = SERIES_DASHES[index % len(SERIES_DASHES)]
            traces.append(trace)
    return traces_figure(traces, "rows")
