"""Rows to Plotly figures. Pure: no request, no ORM."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from dashboards.models import ms_to_datetime
from dashboards.query_page.chart_units import (
    AXIS_LOOK,
    MILLISECONDS,
    PLOTLY_COLOURS,
    WATERMARK_GAP_UNITS,
    DurationUnit,
    Figure,
    SizeUnit,
    count_axis,
    line_mode,
    panel_axes,
    panel_axis_name,
    plain_layout,
    series_line,
    stacked_panels,
    whole_number_ticks,
)
from dashboards.query_page.compaction import CompactionOutlook
from dashboards.query_page.runtime_figure_parts import sentence_figure
from workers.checkpoint.compactible import is_compaction_batch
from workers.checkpoint.wording import format_size


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    batch_id: int
    timestamp_ms: int
    watermark_ms: int
    is_committed: bool
    # Milliseconds since the previous timed batch, when the query computed it (a downsampled
    # series has lost its neighbours); None: taken from the previous point.
    interval_ms: int | None = None


def batch_timeline_figure(
    points: Iterable[TimelinePoint],
    *,
    sink_compact_interval: int | None = None,
    bucket_width: int = 1,
    has_untimed_batches: bool = False,
) -> Figure:
    """Batch id, interval since the previous batch, and the watermark, against batch start time.

    Batches without a timestamp (Spark 2.0-era logs wrote 0) cannot be placed on a time axis and
    are left out. With a file sink's compact interval, its compaction batches (a file sink's batch
    ids are the query's) are marked: they are the batches that rewrite the whole sink log. A
    ``bucket_width`` above 1 says the points are the min/max of every that many batches: the
    figure says so, and leaves out the compaction marks, which would be a random few. A panel
    without data is left out and named in a note; without any timed batch, a sentence says why
    (``has_untimed_batches``: the range has batches, all without a start time).

    A plain dict in Plotly's figure schema (as the Runtime charts): plotly.py's graph objects
    validated and deep-copied every array, most of an uncached request's CPU and, in a fresh
    process, its first use of plotly.py (docs/benchmarks.md).
    """
    timed = [p for p in points if p.timestamp_ms > 0]
    if not timed:
        sentence = TIMELINE_UNTIMED if has_untimed_batches else TIMELINE_EMPTY
        return sentence_figure(sentence, height_px=TIMELINE_HEIGHT_PX)
    times = [p.timestamp_ms for p in timed]
    panels = _timeline_panels(timed, times, sink_compact_interval if bucket_width == 1 else None)
    layout = stacked_panels([p.title for p in panels], spacing=0.06)
    layout["yaxis"].update(whole_number_ticks(p.batch_id for p in timed))
    for row, panel in enumerate(panels, start=1):
        # Epoch milliseconds on date axes: short JSON, and no datetime to format per point.
        layout[panel_axis_name("x", row)]["type"] = "date"
        if panel.y_is_time:
            layout[panel_axis_name("y", row)]["type"] = "date"
    layout.update(
        height=TIMELINE_HEIGHT_PX,
        margin={"l": 60, "r": 20, "t": 40, "b": 40},
        legend={"orientation": "h"},
        colorway=list(PLOTLY_COLOURS),
    )
    data = [{**trace, **panel_axes(row)} for row, panel in enumerate(panels, start=1) for trace in panel.traces]
    figure = {"data": data, "layout": layout}
    _say_if_downsampled(layout, bucket_width)
    _say_what_is_left_out(layout, timed)
    return figure


TIMELINE_HEIGHT_PX = 620  # the CSS of .chart reserves as much before the figure arrives
TIMELINE_EMPTY = (
    "No batches in this range yet: the timeline starts once the query has written offsets/0 "
    "and the next sync has read it."
)
TIMELINE_UNTIMED = (
    "No batch here has a start time (Spark 2.0 wrote 0 as batchTimestampMs), so none can be placed "
    "on a time axis; the batch table lists them."
)


@dataclass(frozen=True, slots=True)
class _Panel:
    title: str
    traces: tuple[dict, ...]
    y_is_time: bool = False


def _timeline_panels(timed: list[TimelinePoint], times: list[int], compact_interval: int | None) -> list[_Panel]:
    """The batch ids, then the intervals and the watermark where there are any."""
    batches = [_batch_trace(timed, times, committed=True), _batch_trace(timed, times, committed=False)]
    if compact_interval:
        batches.append(_compaction_trace(timed, times, compact_interval))
    panels = [_Panel("Batch id", tuple(batches))]
    interval = _interval_trace(timed, times)
    if interval is not None:
        panels.append(interval)
    if any(p.watermark_ms > 0 for p in timed):
        panels.append(_Panel("Watermark (event time)", (_watermark_trace(timed, times),), y_is_time=True))
    return panels


def _say_what_is_left_out(layout: dict, timed: list[TimelinePoint]) -> None:
    """A note under the chart for each panel it cannot draw, so nothing is missing unsaid."""
    notes = []
    if len(timed) < 2:
        notes.append("no interval: a single timed batch")
    if not any(p.watermark_ms > 0 for p in timed):
        notes.append("no watermark: Spark reports one for queries with withWatermark, once a batch has set it")
    if notes:
        layout["annotations"].append(
            {
                "text": "; ".join(notes),
                "showarrow": False,
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": -0.08,
                "xanchor": "left",
                "yanchor": "top",
                "font": {"size": 11, "color": "#555"},
            }
        )


def _say_if_downsampled(layout: dict, bucket_width: int) -> None:
    if bucket_width > 1:
        layout["title"] = {
            "text": f"Downsampled: lowest and highest value of every {bucket_width:,} batches; "
            "choose a smaller batch range for every batch",
            "font": {"size": 13},
            "x": 0.05,  # where plotly.py's default template puts a title
        }
        layout["margin"]["t"] = 70


def _scatter(**properties) -> dict:
    return {"type": "scatter", **properties}


def _batch_trace(points: list[TimelinePoint], times: list[int], *, committed: bool) -> dict:
    chosen = [(t, p.batch_id) for t, p in zip(times, points, strict=True) if p.is_committed == committed]
    name = "committed" if committed else "uncommitted"
    return _scatter(
        x=[t for t, _ in chosen],
        y=[b for _, b in chosen],
        mode="markers",
        name=name,
        marker={"color": "#2b7bb9" if committed else "#d9534f", "size": 6 if committed else 10},
        hovertemplate=f"batch %{{y}}, {name}<br>started %{{x}}<extra></extra>",
    )


def _compaction_trace(points: list[TimelinePoint], times: list[int], interval: int) -> dict:
    chosen = [(t, p.batch_id) for t, p in zip(times, points, strict=True) if is_compaction_batch(p.batch_id, interval)]
    return _scatter(
        x=[t for t, _ in chosen],
        y=[b for _, b in chosen],
        mode="markers",
        name="sink log compaction",
        marker={"symbol": "diamond-open", "size": 13, "color": "#6f42c1"},
        hovertemplate="batch %{y}: file sink log compaction<extra></extra>",
    )


def _interval_trace(points: list[TimelinePoint], times: list[int]) -> _Panel | None:
    gaps_ms = [
        later.timestamp_ms - earlier.timestamp_ms if later.interval_ms is None else later.interval_ms
        for earlier, later in zip(points, points[1:], strict=False)
    ]
    if not gaps_ms:
        return None
    unit = DurationUnit.for_longest(max(gaps_ms), INTERVAL_UNITS)
    trace = _scatter(
        x=times[1:],
        y=[gap / unit.ms for gap in gaps_ms],
        customdata=[p.batch_id for p in points[1:]],
        mode=line_mode(len(gaps_ms)),
        name="batch interval",
        # A step: a batch's interval spans the time since the previous one, so an idle hour before a
        # batch reads as an hour-long plateau, not a slope that seems to grow through that hour.
        line={"color": "#5cb85c", "shape": "vh"},
        hovertemplate=f"batch %{{customdata}}: %{{y:,.3~f}} {unit.name} after the previous one<extra></extra>",
    )
    return _Panel(f"Interval since the previous batch ({unit.name})", (trace,))


INTERVAL_UNITS = (MILLISECONDS, *WATERMARK_GAP_UNITS)


def _watermark_trace(points: list[TimelinePoint], times: list[int]) -> dict:
    # Spark writes 0 until the first watermark is known; that is "none", not 1970.
    # As ISO text, not epoch milliseconds: Plotly reads a 2- or 4-digit number on a date axis as a
    # year, and a watermark can be a few seconds after the epoch (a rate source's event time).
    marks = [
        (t, ms_to_datetime(p.watermark_ms).isoformat(), p.batch_id)
        for t, p in zip(times, points, strict=True)
        if p.watermark_ms > 0
    ]
    return _scatter(
        x=[t for t, _, _ in marks],
        y=[w for _, w, _ in marks],
        customdata=[b for _, _, b in marks],
        mode=line_mode(len(marks)),
        name="watermark",
        line={"color": "#f0ad4e", "shape": "hv"},
        hovertemplate="batch %{customdata}: watermark %{y}<extra></extra>",
    )


def compact_size_figure(
    sizes: Sequence[tuple[int, int]], outlook: CompactionOutlook | None, *, compact_interval: int
) -> Figure:
    """Size of each compact file against its batch id, the fitted trend and the threshold.

    Plain dicts in Plotly's figure schema, as every chart of the page (batch_timeline_figure says why).
    """
    if not sizes:
        return _no_compact_file_yet(compact_interval)
    unit = SizeUnit.for_largest(max(s for _, s in sizes))
    layout = {
        **plain_layout(),
        "height": COMPACT_SIZE_HEIGHT_PX,
        "margin": {"l": 60, "r": 20, "t": 30, "b": 40},
        "legend": {"orientation": "h"},
        "xaxis": {"title": {"text": "compaction batch id"}, **whole_number_ticks(b for b, _ in sizes), **AXIS_LOOK},
        "yaxis": {"title": {"text": unit.name}, "rangemode": "tozero", **AXIS_LOOK},
    }
    figure = {"data": [_compact_size_trace(sizes, unit)], "layout": layout}
    if outlook is not None:
        _add_projection(figure, sizes, outlook, unit)
    return figure


COMPACT_SIZE_HEIGHT_PX = 320


def _no_compact_file_yet(compact_interval: int) -> Figure:
    first = compact_interval - 1
    return sentence_figure(
        f"No compact file yet: Spark writes the first, {first}.compact, at batch {first} of this log "
        f"(compactInterval {compact_interval}), then one every {compact_interval} batches.",
        height_px=COMPACT_SIZE_HEIGHT_PX,
    )


def _compact_size_trace(sizes: Sequence[tuple[int, int]], unit: SizeUnit) -> dict:
    """The size of each compact file (batch id, bytes), in ``unit``."""
    return _scatter(
        x=[b for b, _ in sizes],
        y=[s / unit.bytes for _, s in sizes],
        text=[format_size(s) for _, s in sizes],
        mode="lines+markers",
        name="compact file size",
        line={"color": "#2b7bb9"},
        hovertemplate="batch %{x}: %{text}<extra></extra>",
    )


def _add_projection(
    figure: Figure, sizes: Sequence[tuple[int, int]], outlook: CompactionOutlook, unit: SizeUnit
) -> None:
    """The fitted trend a little past the data; the threshold line only when it is near the data.

    Drawing the trend all the way to a crossing thousands of batches away would squash the
    measured points into a corner; the table gives the crossing batch instead.
    """
    first, last = sizes[0][0], sizes[-1][0]
    end = last + max(last - first, 1)
    if outlook.crossing_batch_id is not None:
        end = min(end, max(outlook.crossing_batch_id, last))
    xs = (first, end)
    ys = [outlook.intercept_bytes + outlook.bytes_per_batch * x for x in xs]
    figure["data"].append(
        _scatter(
            x=list(xs),
            y=[y / unit.bytes for y in ys],
            text=[format_size(y) for y in ys],
            mode="lines",
            name="trend",
            line={"dash": "dot", "color": "#888"},
            hovertemplate="batch %{x}: %{text} on the trend<extra></extra>",
        )
    )
    if outlook.threshold_bytes <= 2 * max(max(s for _, s in sizes), *ys):
        label = f"{format_size(outlook.threshold_bytes)}: a compaction would outlast the trigger interval"
        _add_horizontal_line(figure["layout"], outlook.threshold_bytes / unit.bytes, label)


def _add_horizontal_line(layout: dict, y: float, label: str) -> None:
    """A dashed red line across the plot at ``y``, labelled above its right end (plotly.py's add_hline)."""
    line = {"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": y, "y1": y}
    layout.setdefault("shapes", []).append({**line, "line": {"color": "#d9534f", "dash": "dash"}})
    layout.setdefault("annotations", []).append(
        {
            "text": label,
            "showarrow": False,
            "xref": "x domain",
            "x": 1,
            "xanchor": "right",
            "yref": "y",
            "y": y,
            "yanchor": "bottom",
        }
    )


@dataclass(frozen=True, slots=True)
class InventoryPoint:
    taken_at: datetime
    path: str
    size_bytes: int
    files: int


INVENTORY_HEIGHT_PX = 480
INVENTORY_EMPTY = "No inventory yet: the next full pass counts the files and bytes of each directory."


def inventory_growth_figure(points: Iterable[InventoryPoint]) -> Figure:
    """Bytes and files of each directory at each inventory pass: one line per directory, one colour
    (and dash) per directory in both panels, so the legend names every line."""
    by_path = _inventory_by_path(points)
    if not by_path:
        return sentence_figure(INVENTORY_EMPTY, height_px=INVENTORY_HEIGHT_PX)
    unit = SizeUnit.for_largest(max(p.size_bytes for series in by_path.values() for p in series))
    layout = stacked_panels([f"Size ({unit.name})", "Files"], spacing=0.08)
    for row in (1, 2):
        layout[panel_axis_name("x", row)]["type"] = "date"  # epoch milliseconds, as the timeline's
    layout["yaxis"]["rangemode"] = "tozero"
    layout["yaxis2"].update(count_axis(p.files for series in by_path.values() for p in series))
    layout.update(height=INVENTORY_HEIGHT_PX, margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return {"data": _inventory_lines(by_path, unit), "layout": layout}


def _inventory_by_path(points: Iterable[InventoryPoint]) -> dict[str, list[InventoryPoint]]:
    by_path: dict[str, list[InventoryPoint]] = {}
    for point in points:
        by_path.setdefault(point.path or "(root)", []).append(point)
    return by_path


def _inventory_lines(by_path: dict[str, list[InventoryPoint]], unit: SizeUnit) -> list[dict]:
    """Each directory's size line in the first panel and its files line in the second, in its own look."""
    data = []
    for index, (path, series) in enumerate(sorted(by_path.items())):
        size, files = _inventory_traces(path, series, unit, series_line(index))
        data += [{**size, **panel_axes(1)}, {**files, **panel_axes(2)}]
    return data


def _inventory_traces(path: str, series: list[InventoryPoint], unit: SizeUnit, line: dict) -> tuple[dict, dict]:
    """The directory's size line (in the legend) and its files line (the same look, not repeated)."""
    times = [round(p.taken_at.timestamp() * 1000) for p in series]
    common = {"x": times, "mode": "lines+markers", "name": path, "legendgroup": path, "line": line}
    size = _scatter(
        y=[p.size_bytes / unit.bytes for p in series],
        text=[format_size(p.size_bytes) for p in series],
        hovertemplate=f"{path}: %{{text}}<extra></extra>",
        **common,
    )
    files = _scatter(
        y=[p.files for p in series], hovertemplate=f"{path}: %{{y:,d}} files<extra></extra>", showlegend=False, **common
    )
    return size, files


@dataclass(frozen=True, slots=True)
class PartitionPoint:
    label: str
    rows: int | None
    bytes_on_disk: int
    delta_chain: int | None
    snapshot_age: int | None


@dataclass(frozen=True, slots=True)
class HeatmapMetric:
    attribute: str
    label: str
    # A figure where a higher value costs something at restart (files replayed) is coloured from
    # pale (0) to red at ``alarm`` and beyond; sizes and row counts are no alarm in themselves and
    # are coloured in blues from 0 to the row's largest value, so a uniform row is one calm colour.
    alarm: int | None
    unit: str


# Top to bottom. A chain of 20 is where the state table marks a store (Spark snapshots every
# minDeltasForSnapshot = 10 versions by default; twice that means maintenance is falling behind).
HEATMAP_METRICS = (
    HeatmapMetric("snapshot_age", "versions since snapshot", 20, "versions"),
    HeatmapMetric("delta_chain", "delta chain", 20, "files"),
    HeatmapMetric("bytes_on_disk", "bytes on disk", None, "bytes"),
    HeatmapMetric("rows", "rows", None, "rows"),
)
# ColorBrewer's scales, pale (low) to dark (high), as plotly.py sends "YlOrRd" and "Blues": plotly.js's
# own scales of those names run the other way.
ALARM_COLOURS = ("#ffffcc", "#ffeda0", "#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026", "#800026")
CALM_COLOURS = ("#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")


def _colour_scale(colours: tuple[str, ...]) -> list[list]:
    return [[index / (len(colours) - 1), colour] for index, colour in enumerate(colours)]


# Above this many partitions the cells are too narrow for their numbers; hover still shows them.
HEATMAP_CELL_TEXT_LIMIT = 40


def state_heatmap_figure(points: Sequence[PartitionPoint]) -> Figure:
    """One column per partition, one row per figure, each row with its own colour scale, shown
    beside it (values differ by orders of magnitude between rows). An unknown value stays blank."""
    if not points:
        return sentence_figure(HEATMAP_EMPTY, height_px=HEATMAP_HEIGHT_PX)
    columns = [p.label for p in points]
    layout = stacked_panels([""] * len(HEATMAP_METRICS), spacing=0.04)
    data = []
    for row, metric in enumerate(HEATMAP_METRICS, start=1):
        trace = _heatmap_row(metric, [getattr(p, metric.attribute) for p in points], columns)
        low, high = layout[panel_axis_name("y", row)]["domain"]
        trace["colorbar"].update(y=(low + high) / 2, len=high - low, yanchor="middle")  # beside its row
        data.append({**trace, **panel_axes(row)})
        layout[panel_axis_name("x", row)]["type"] = "category"
    layout[panel_axis_name("x", len(HEATMAP_METRICS))]["title"] = {"text": "partition (operator/store/partition)"}
    layout.update(height=HEATMAP_HEIGHT_PX, margin={"l": 160, "r": 20, "t": 20, "b": 90})
    return {"data": data, "layout": layout}


HEATMAP_HEIGHT_PX = 110 + 70 * len(HEATMAP_METRICS)
HEATMAP_EMPTY = (
    "No state store partitions read yet: a query with stateful operators shows them after the next full pass "
    "has listed state/."
)


def _heatmap_row(metric: HeatmapMetric, values: list[int | None], columns: list[str]) -> dict:
    known = [v for v in values if v is not None]
    top = max(known, default=0)
    if metric.alarm is None:
        colorscale, zmax = _colour_scale(CALM_COLOURS), top or 1
    else:
        colorscale, zmax = _colour_scale(ALARM_COLOURS), max(top, metric.alarm)
    text = ["?" if v is None else _heatmap_value(v, metric.unit) for v in values]
    cell_text = {"texttemplate": "%{text}"} if len(columns) <= HEATMAP_CELL_TEXT_LIMIT else {}
    return {
        "type": "heatmap",
        "x": columns,
        "y": [metric.label],
        "z": [values],
        "text": [text],
        "zmin": 0,
        "zmax": zmax,
        "colorscale": colorscale,
        **cell_text,
        "hovertemplate": f"partition %{{x}}<br>{metric.label}: %{{text}}{_unit_after(metric.unit)}<extra></extra>",
        "colorbar": _colorbar(metric.unit, zmax),
    }


def _heatmap_value(value: int, unit: str) -> str:
    return format_size(value) if unit == "bytes" else f"{value:,}"


def _unit_after(unit: str) -> str:
    """What follows a cell's text in its hover: a size's text names its unit already."""
    return "" if unit == "bytes" else f" {unit}"


def _colorbar(unit: str, zmax: int) -> dict:
    """Three whole-number ticks, 0 to ``zmax``, written as the hovers write them."""
    ticks = sorted({0, round(zmax / 2), zmax})
    return {
        "title": {"text": "size" if unit == "bytes" else unit, "side": "right"},
        "thickness": 10,
        "tickvals": ticks,
        "ticktext": [format_size(tick) if unit == "bytes" else f"{tick:,}" for tick in ticks],
    }
