"""The query page's Runtime charts, as Spark's Structured Streaming tab draws them. Pure: no request, no ORM.

One figure per chart, all against the batch start time (StreamingQueryProgress.timestamp) on a date
axis fed epoch milliseconds (short JSON). Every point carries its batch id: the hover names it and
a click opens the batch page (charts.js reads the page's address from ``layout.meta.link``). The
figures follow Spark's UI (StreamingQueryStatisticsPage): the operation durations stacked without
triggerExecution (it is their total), the watermark gap only where a watermark is set (Spark
reports 1970-01-01 before the first one), but state figures per operator rather than summed.

Events worth knowing when reading a chart (restarts, compactions, maintenance...) are marks on
every chart: a dotted vertical line (a band where they are dense), and a symbol in a lane above the
plot, a row per kind, whose hover names the event (dashboards.query_page.mark_lane).

The figures are plain dicts in Plotly's figure schema, serialised with ``json``: plotly.py's
graph objects validate and deep-copy every array, which took 360 ms of CPU for the nine figures
of a long history (1,000 points each), against about 10 ms this way; the few layout properties
of plotly.py's default template that the page's other charts show are set here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dashboards.query_page.chart_units import BATCH_DURATION_UNITS, WATERMARK_GAP_UNITS, DurationUnit, Figure
from dashboards.query_page.mark_lane import RuntimeMark, mark_decorations
from dashboards.query_page.runtime_figure_parts import (
    counted,
    finish_figure,
    lines_figure,
    longest,
    per_series_figure,
    scaled,
    sentence_figure,
    traces_figure,
)
from dashboards.query_page.runtime_points import LagPoint, OperatorPoint, ProgressPoint
from dashboards.query_page.runtime_state_figures import state_figures

# Spark's order of the phases of a micro-batch (MicroBatchExecution.reportTimeTaken); others follow by name.
PHASE_ORDER = (
    "latestOffset",
    "getOffset",
    "setOffsetRange",
    "getEndOffset",
    "walCommit",
    "getBatch",
    "queryPlanning",
    "addBatch",
    "commitOffsets",
)
TOTAL_PHASE = "triggerExecution"


@dataclass(frozen=True, slots=True)
class RuntimeChart:
    part: str
    caption: str
    is_stateful: bool


RUNTIME_CHARTS = (
    RuntimeChart("rates", "Input rate and process rate", False),
    RuntimeChart("input-rows", "Input rows", False),
    RuntimeChart("batch-duration", "Batch duration", False),
    RuntimeChart("phases", "Operation duration by phase", False),
    RuntimeChart("watermark-gap", "Global watermark gap", False),
    RuntimeChart("behind-head", "Offsets behind each source's head", False),
    RuntimeChart("state-rows", "State rows total", True),
    RuntimeChart("state-changes", "State rows updated, removed and dropped by watermark", True),
    RuntimeChart("state-memory", "State memory used", True),
    RuntimeChart("state-cache", "State cache hit ratio", True),
)


def runtime_figures(
    progress: Sequence[ProgressPoint],
    operators: Sequence[OperatorPoint],
    marks: Sequence[RuntimeMark] = (),
    *,
    lags: Sequence[LagPoint] = (),
    bucket_width: int = 1,
    state_bucket_width: int = 1,
    lag_bucket_width: int = 1,
    batch_link: str = "",
) -> dict[str, Figure]:
    """Every Runtime chart, keyed by its RUNTIME_CHARTS part; the state charts only with operators.

    ``batch_link`` is the batch page's address with ``{}`` for the batch id. A bucket width above
    1 says the points are the lowest and highest values of every that many batches (the state
    charts' and the lag chart's series are downsampled apart).
    """
    figures = _progress_figures(progress)
    state = state_figures(operators) if operators else {}
    decorations = mark_decorations(marks, _time_span(progress, operators, marks))
    for figure in figures.values():
        finish_figure(figure, decorations, bucket_width, batch_link, has_legend=len(figure["data"]) > 1)
    figures["behind-head"] = _behind_head_figure(lags)
    finish_figure(figures["behind-head"], decorations, lag_bucket_width, batch_link, has_legend=True)
    for figure in state.values():  # the legend names the operators
        finish_figure(figure, decorations, state_bucket_width, batch_link, has_legend=True)
    return {**figures, **state}


def _progress_figures(progress: Sequence[ProgressPoint]) -> dict[str, Figure]:
    """The charts of the batches' progress (not of state, not of lag), keyed by part."""
    unit = DurationUnit.for_longest(longest(p.batch_duration_ms for p in progress), BATCH_DURATION_UNITS)
    return {
        "rates": _rates_figure(progress),
        "input-rows": _input_rows_figure(progress),
        "batch-duration": _batch_duration_figure(progress, unit),
        "phases": _phases_figure(progress, unit),
        "watermark-gap": _watermark_gap_figure(progress),
    }


def _input_rows_figure(progress: Sequence[ProgressPoint]) -> Figure:
    return counted(lines_figure(progress, [("input rows", "#2b7bb9", lambda p: p.num_input_rows)], "rows", ",d"))


def _batch_duration_figure(progress: Sequence[ProgressPoint], unit: DurationUnit) -> Figure:
    return lines_figure(
        progress, [("batch duration", "#5b8c3a", scaled(lambda p: p.batch_duration_ms, unit))], unit.name, ",.3~f"
    )


def _time_span(
    progress: Sequence[ProgressPoint], operators: Sequence[OperatorPoint], marks: Sequence[RuntimeMark]
) -> tuple[int, int]:
    """The first and last moment the charts show (epoch ms)."""
    moments = [p.timestamp_ms for p in progress] + [p.timestamp_ms for p in operators] + [m.time_ms for m in marks]
    return (min(moments), max(moments)) if moments else (0, 0)


def runtime_figures_json(figures: Mapping[str, Figure]) -> str:
    """One JSON object of the figures by part, as the chart endpoint returns it."""
    return figure_json(figures)


def figure_json(figure: Figure | Mapping[str, Figure]) -> str:
    """A plain-dict figure (or figures by part) as the JSON Plotly.react takes."""
    return json.dumps(figure, separators=(",", ":"), allow_nan=False)


def _rates_figure(progress: Sequence[ProgressPoint]) -> Figure:
    return lines_figure(
        progress,
        [
            ("input rate", "#2b7bb9", lambda p: p.input_rows_per_second),
            ("process rate", "#e07b00", lambda p: p.processed_rows_per_second),
        ],
        "rows/s",
        ",.1f",
    )


def _watermark_gap_figure(progress: Sequence[ProgressPoint]) -> Figure:
    if all(p.watermark_gap_ms is None for p in progress):
        return sentence_figure(
            "No event-time watermark in this range: Spark reports one for queries with withWatermark, "
            "once the first batch has set it."
        )
    unit = DurationUnit.for_longest(longest(p.watermark_gap_ms for p in progress), WATERMARK_GAP_UNITS)
    return lines_figure(
        progress, [("watermark gap", "#8a5a9e", scaled(lambda p: p.watermark_gap_ms, unit))], unit.name, ",.3~f"
    )


def _behind_head_figure(lags: Sequence[LagPoint]) -> Figure:
    """A line per source that reports its lag; each source counts in its own offsets (Kafka: records)."""
    by_source: dict[int, list[LagPoint]] = {}
    for point in lags:
        by_source.setdefault(point.source_index, []).append(point)
    series = [(points[-1].label, points) for _, points in sorted(by_source.items())]
    if not series:
        return sentence_figure(
            "No source reported how far it is behind its head in this range: Spark reports it for Kafka "
            "(offsets behind latest) and sources that give a latestOffset; rate and file sources do not."
        )
    return per_series_figure(series, lambda p: p.offsets_behind, "offsets", ",d")


def _phases_figure(progress: Sequence[ProgressPoint], unit: DurationUnit) -> Figure:
    """The phases of each batch stacked (a missing phase counts 0, as Spark's UI pads it)."""
    phases = _phases_of(progress)
    if not phases:
        return sentence_figure("Spark reported no durationMs phases in this range.")
    times, batches = [p.timestamp_ms for p in progress], [p.batch_id for p in progress]
    traces = [
        {
            "type": "scatter",
            "x": times,
            "y": [p.duration_ms.get(phase, 0) / unit.ms for p in progress],
            "customdata": batches,
            "name": phase,
            "stackgroup": "phases",
            "mode": "lines",
            "line": {"width": 0.5},
            "hovertemplate": f"%{{y:,.3~f}} {unit.name} · batch %{{customdata}}<extra>{phase}</extra>",
        }
        for phase in phases
    ]
    return traces_figure(traces, unit.name)


def _phases_of(progress: Iterable[ProgressPoint]) -> list[str]:
    found = {phase for p in progress for phase in p.duration_ms} - {TOTAL_PHASE}
    known = [phase for phase in PHASE_ORDER if phase in found]
    return known + sorted(found - set(known))
