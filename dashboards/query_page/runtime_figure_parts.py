"""What every Runtime figure is built from: its lines (a marker per point while they can be told
apart), a sentence in place of an empty chart, and the layout they share: the time axis, the
legend, the link a click opens, the marks' lane and the note of a downsampled history.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Iterable, Sequence

from dashboards.query_page.chart_units import (
    AXIS_LOOK,
    PLOTLY_COLOURS,
    DurationUnit,
    Figure,
    count_axis,
    line_mode,
    series_line,
)
from dashboards.query_page.mark_lane import MarkDecorations, add_lane
from dashboards.query_page.runtime_points import OperatorPoint, ProgressPoint

CHART_HEIGHT_PX = 320  # the CSS of .chart.runtime reserves as much before the figure arrives
SENTENCE_LINE_CHARS = 44  # a sentence in place of a chart fits a 380-pixel chart


def lines_figure(progress: Sequence[ProgressPoint], lines, unit: str, number_format: str) -> Figure:
    traces = [
        line_trace(progress, value, name=name, colour=colour, unit=unit, number_format=number_format)
        for name, colour, value in lines
    ]
    if not any(trace["x"] for trace in traces):
        return sentence_figure(f"Spark reported no {' or '.join(name for name, _, _ in lines)} in this range.")
    return traces_figure(traces, unit)


def line_trace(points, value: Callable, *, name: str, colour: str, unit: str, number_format: str) -> dict:
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


def traces_figure(traces: list[dict], unit: str) -> Figure:
    return {"data": traces, "layout": {"yaxis": {"title": {"text": unit}}}}


def scaled(value: Callable[[ProgressPoint], int | None], unit: DurationUnit) -> Callable[[ProgressPoint], float | None]:
    def scaled(point: ProgressPoint) -> float | None:
        raw = value(point)
        return None if raw is None else raw / unit.ms

    return scaled


def longest(values: Iterable[int | None]) -> int | None:
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


def finish_figure(
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


def counted(figure: Figure) -> Figure:
    """The figure with a count axis: whole-number ticks, from zero (a sentence is left as it is)."""
    if figure["data"]:
        figure["layout"]["yaxis"].update(count_axis(y for trace in figure["data"] for y in trace["y"]))
    return figure


def per_series_figure(series, value: Callable[[OperatorPoint], object], unit: str, number_format: str) -> Figure:
    """A line per operator: past the palette's colours they come round again with another dash,
    so a query with more stateful operators than colours still has every one drawn."""
    traces = []
    for index, (label, points) in enumerate(series):
        line = series_line(index)
        trace = line_trace(points, value, name=label, colour=line["color"], unit=unit, number_format=number_format)
        trace["line"]["dash"] = line["dash"]
        traces.append(trace)
    return traces_figure(traces, unit)
