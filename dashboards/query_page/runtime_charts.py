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
import math
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from dashboards.query_page.chart_units import (
    AXIS_LOOK,
    PLOTLY_COLOURS,
    SERIES_DASHES,
    SizeUnit,
    count_axis,
    line_mode,
    series_line,
)
from dashboards.query_page.mark_lane import MarkDecorations, RuntimeMark, add_lane, mark_decorations
from workers.checkpoint.wording import format_size

Figure = dict  # {"data": [trace, ...], "layout": {...}}, as Plotly.react takes them

CHART_HEIGHT_PX = 320  # the CSS of .chart.runtime reserves as much before the figure arrives
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
SENTENCE_LINE_CHARS = 44  # a sentence in place of a chart fits a 380-pixel chart
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


@dataclass(frozen=True, slots=True)
class DurationUnit:
    name: str
    ms: int

    @classmethod
    def for_longest(cls, longest_ms: float | None, units: Sequence[DurationUnit]) -> DurationUnit:
        """The largest of ``units`` (smallest first) in which the longest value is 10 or more, so
        the axis reads "12.5 s" rather than "12,500 ms", "3 d" rather than "260k s"."""
        fitting = [unit for unit in units if longest_ms is not None and longest_ms >= 10 * unit.ms]
        return fitting[-1] if fitting else units[0]


MILLISECONDS, SECONDS = DurationUnit("ms", 1), DurationUnit("s", 1_000)
BATCH_DURATION_UNITS = (MILLISECONDS, SECONDS)
WATERMARK_GAP_UNITS = (
    SECONDS,
    DurationUnit("min", 60_000),
    DurationUnit("h", 3_600_000),
    DurationUnit("d", 86_400_000),
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
    state = _state_figures(operators) if operators else {}
    decorations = mark_decorations(marks, _time_span(progress, operators, marks))
    for figure in figures.values():
        _finish(figure, decorations, bucket_width, batch_link, has_legend=len(figure["data"]) > 1)
    figures["behind-head"] = _behind_head_figure(lags)
    _finish(figures["behind-head"], decorations, lag_bucket_width, batch_link, has_legend=True)
    for figure in state.values():  # the legend names the operators
        _finish(figure, decorations, state_bucket_width, batch_link, has_legend=True)
    return {**figures, **state}


def _progress_figures(progress: Sequence[ProgressPoint]) -> dict[str, Figure]:
    """The charts of the batches' progress (not of state, not of lag), keyed by part."""
    unit = DurationUnit.for_longest(_longest(p.batch_duration_ms for p in progress), BATCH_DURATION_UNITS)
    return {
        "rates": _rates_figure(progress),
        "input-rows": _input_rows_figure(progress),
        "batch-duration": _batch_duration_figure(progress, unit),
        "phases": _phases_figure(progress, unit),
        "watermark-gap": _watermark_gap_figure(progress),
    }


def _input_rows_figure(progress: Sequence[ProgressPoint]) -> Figure:
    return _counted(_lines_figure(progress, [("input rows", "#2b7bb9", lambda p: p.num_input_rows)], "rows", ",d"))


def _batch_duration_figure(progress: Sequence[ProgressPoint], unit: DurationUnit) -> Figure:
    return _lines_figure(
        progress, [("batch duration", "#5b8c3a", _scaled(lambda p: p.batch_duration_ms, unit))], unit.name, ",.3~f"
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
    return _lines_figure(
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
    unit = DurationUnit.for_longest(_longest(p.watermark_gap_ms for p in progress), WATERMARK_GAP_UNITS)
    return _lines_figure(
        progress, [("watermark gap", "#8a5a9e", _scaled(lambda p: p.watermark_gap_ms, unit))], unit.name, ",.3~f"
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
    return _per_operator_figure(series, lambda p: p.offsets_behind, "offsets", ",d")


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
    return _figure(traces, unit.name)


def _phases_of(progress: Iterable[ProgressPoint]) -> list[str]:
    found = {phase for p in progress for phase in p.duration_ms} - {TOTAL_PHASE}
    known = [phase for phase in PHASE_ORDER if phase in found]
    return known + sorted(found - set(known))


def _state_figures(operators: Sequence[OperatorPoint]) -> dict[str, Figure]:
    by_operator: dict[str, list[OperatorPoint]] = {}
    for point in operators:
        by_operator.setdefault(point.label, []).append(point)
    series = sorted(by_operator.items())
    figures = {
        "state-rows": _counted(_per_operator_figure(series, lambda p: p.num_rows_total, "rows", ",d")),
        "state-changes": _counted(_state_changes_figure(series)),
        "state-memory": _state_memory_figure(series, operators),
        "state-cache": _per_operator_figure(series, lambda p: p.cache_hit_ratio, "hit ratio", ".1%"),
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
    unit = SizeUnit.for_largest(_longest(p.memory_used_bytes for p in operators))
    figure = _per_operator_figure(
        series, lambda p: None if p.memory_used_bytes is None else p.memory_used_bytes / unit.bytes, unit.name, ""
    )
    for trace in figure["data"]:
        trace["text"] = [format_size(y * unit.bytes) for y in trace["y"]]
        trace["hovertemplate"] = f"%{{text}} · batch %{{customdata}}<extra>{trace['name']}</extra>"
    return figure


def _counted(figure: Figure) -> Figure:
    """The figure with a count axis: whole-number ticks, from zero (a sentence is left as it is)."""
    if figure["data"]:
        figure["layout"]["yaxis"].update(count_axis(y for trace in figure["data"] for y in trace["y"]))
    return figure


def _per_operator_figure(series, value: Callable[[OperatorPoint], object], unit: str, number_format: str) -> Figure:
    """A line per operator: past the palette's colours they come round again with another dash,
    so a query with more stateful operators than colours still has every one drawn."""
    traces = []
    for index, (label, points) in enumerate(series):
        line = series_line(index)
        trace = _trace(points, value, name=label, colour=line["color"], unit=unit, number_format=number_format)
        trace["line"]["dash"] = line["dash"]
        traces.append(trace)
    return _figure(traces, unit)


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
            trace = _trace(
                points,
                value,
                name=change if len(series) == 1 else f"{label} {change}",
                colour=colour,
                unit="rows",
                number_format=",d",
            )
            trace["line"]["dash"] = SERIES_DASHES[index % len(SERIES_DASHES)]
            traces.append(trace)
    return _figure(traces, "rows")


def _lines_figure(progress: Sequence[ProgressPoint], lines, unit: str, number_format: str) -> Figure:
    traces = [
        _trace(progress, value, name=name, colour=colour, unit=unit, number_format=number_format)
        for name, colour, value in lines
    ]
    if not any(trace["x"] for trace in traces):
        return sentence_figure(f"Spark reported no {' or '.join(name for name, _, _ in lines)} in this range.")
    return _figure(traces, unit)


def _trace(points, value: Callable, *, name: str, colour: str, unit: str, number_format: str) -> dict:
    """A line of the points whose ``value`` is known, each point carrying its batch id."""
    chosen = [(p.timestamp_ms, v, p.batch_id) for p in points if (v := value(p)) is not None and math.isfinite(v)]
    return {
        "type": "scatter",
        "x": [x for x, _, _ in chosen],
        "y": [y for _, y, _ in chosen],
        "customdata": [b for _, _, b in chosen],
        "name": name,
        "mode": line_mode(len(chosen)),
        "line": {"color": colour, "width": 1.5},
        "marker": {"size": 5},
        "hovertemplate": f"%{{y:{number_format}}} {unit} · batch %{{customdata}}<extra>{name}</extra>",
    }


def _figure(traces: list[dict], unit: str) -> Figure:
    return {"data": traces, "layout": {"yaxis": {"title": {"text": unit}}}}


def _scaled(
    value: Callable[[ProgressPoint], int | None], unit: DurationUnit
) -> Callable[[ProgressPoint], float | None]:
    def scaled(point: ProgressPoint) -> float | None:
        raw = value(point)
        return None if raw is None else raw / unit.ms

    return scaled


def _longest(values: Iterable[int | None]) -> int | None:
    return max((value for value in values if value is not None), default=None)


def sentence_figure(sentence: str, *, height_px: int = CHART_HEIGHT_PX) -> Figure:
    """No axes, only what is missing: an empty chart says so in words (broken into lines by hand:
    Plotly does not wrap an annotation, and a chart may be a phone's width)."""
    lines = "<br>".join(textwrap.wrap(sentence, SENTENCE_LINE_CHARS))
    return {
        "data": [],
        "layout": {
            "height": height_px,
            "xaxis": {"visible": False},
            "yaxis": {"visible": False},
            "plot_bgcolor": "#fff",
            "meta": {"sentence": sentence},
            "annotations": [
                {
                    "text": lines,
                    "showarrow": False,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "font": {"size": 13, "color": "#555"},
                }
            ],
        },
    }


def _finish(
    figure: Figure, decorations: MarkDecorations, bucket_width: int, batch_link: str, *, has_legend: bool
) -> None:
    """Size, look, axes, marks and the notes every Runtime chart shares."""
    layout = figure["layout"]
    is_sentence = "sentence" in layout.get("meta", {})
    layout.update(_shared_layout(layout, show_legend=has_legend and not is_sentence, batch_link=batch_link))
    if is_sentence:
        return
    _set_time_axes(layout)
    if decorations.traces:
        add_lane(figure, decorations)
    if bucket_width > 1:
        layout.setdefault("annotations", []).append(_bucket_note(bucket_width))


def _shared_layout(layout: dict, *, show_legend: bool, batch_link: str) -> dict:
    """Size, margins, hover, fonts, legend and colours of every Runtime chart, and the batch link."""
    return dict(
        height=CHART_HEIGHT_PX,
        margin={"l": 64, "r": 16, "t": 24, "b": 36},
        hovermode="x unified",
        uirevision="runtime",
        showlegend=show_legend,
        font={"size": 11, "color": "#2a3f5f"},
        hoverlabel={"align": "left"},
        legend={"orientation": "h", "y": -0.18, "yanchor": "top", "font": {"size": 11}},
        colorway=list(PLOTLY_COLOURS),
        meta={**layout.get("meta", {}), "link": batch_link},
    )


def _set_time_axes(layout: dict) -> None:
    """The plot's background, the batch start axis, and the value axis from zero in the shared look."""
    layout.update(plot_bgcolor="#E5ECF6")
    layout["xaxis"] = {
        "type": "date",
        "hoverformat": "%Y-%m-%d %H:%M:%S.%L UTC",
        "title": {"text": "batch start (UTC)", "font": {"size": 10}, "standoff": 4},
        **AXIS_LOOK,
    }
    layout["yaxis"] = {"rangemode": "tozero", **AXIS_LOOK, **layout["yaxis"]}


def _bucket_note(bucket_width: int) -> dict:
    """The note above a downsampled chart: each point is the range of ``bucket_width`` batches."""
    return {
        "text": f"lowest and highest of every {bucket_width:,} batches",
        "showarrow": False,
        "xref": "paper",
        "yref": "paper",
        "x": 1,
        "y": 1,
        "xanchor": "right",
        "yanchor": "bottom",
        "font": {"size": 10, "color": "#777"},
    }
