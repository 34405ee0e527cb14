"""Rows to Plotly figures. Pure: no request, no ORM."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dashboards.models import ms_to_datetime
from dashboards.query_page.compaction import CompactionOutlook
from workers.checkpoint.compactible import is_compaction_batch


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
    points: Iterable[TimelinePoint], *, sink_compact_interval: int | None = None, bucket_width: int = 1
) -> go.Figure:
    """Batch id, interval since the previous batch, and the watermark, against batch start time.

    Batches without a timestamp (Spark 2.0-era logs wrote 0) cannot be placed on a time axis and
    are left out. With a file sink's compact interval, its compaction batches (a file sink's batch
    ids are the query's) are marked: they are the batches that rewrite the whole sink log. A
    ``bucket_width`` above 1 says the points are the min/max of every that many batches: the
    figure says so, and leaves out the compaction marks, which would be a random few.
    """
    timed = [p for p in points if p.timestamp_ms > 0]
    times = [ms_to_datetime(p.timestamp_ms) for p in timed]
    figure = make_subplots(
        rows=3,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.06,
        subplot_titles=("Batch id", "Seconds since previous batch", "Watermark (event time)"),
    )
    figure.add_trace(_batch_trace(timed, times, committed=True), row=1, col=1)
    figure.add_trace(_batch_trace(timed, times, committed=False), row=1, col=1)
    if sink_compact_interval and bucket_width == 1:
        figure.add_trace(_compaction_trace(timed, times, sink_compact_interval), row=1, col=1)
    figure.add_trace(_interval_trace(timed, times), row=2, col=1)
    figure.add_trace(_watermark_trace(timed, times), row=3, col=1)
    figure.update_layout(height=620, margin={"l": 60, "r": 20, "t": 40, "b": 40}, legend={"orientation": "h"})
    _say_if_downsampled(figure, bucket_width)
    return figure


def _say_if_downsampled(figure: go.Figure, bucket_width: int) -> None:
    if bucket_width > 1:
        figure.update_layout(
            title={
                "text": f"Downsampled: lowest and highest value of every {bucket_width:,} batches; "
                "choose a smaller batch range for every batch",
                "font": {"size": 13},
            },
            margin={"t": 70},
        )


def _batch_trace(points: list[TimelinePoint], times: list[datetime], *, committed: bool) -> go.Scatter:
    chosen = [(t, p.batch_id) for t, p in zip(times, points, strict=True) if p.is_committed == committed]
    return go.Scatter(
        x=[t for t, _ in chosen],
        y=[b for _, b in chosen],
        mode="markers",
        name="committed" if committed else "uncommitted",
        marker={"color": "#2b7bb9" if committed else "#d9534f", "size": 6 if committed else 10},
    )


def _compaction_trace(points: list[TimelinePoint], times: list[datetime], interval: int) -> go.Scatter:
    chosen = [(t, p.batch_id) for t, p in zip(times, points, strict=True) if is_compaction_batch(p.batch_id, interval)]
    return go.Scatter(
        x=[t for t, _ in chosen],
        y=[b for _, b in chosen],
        mode="markers",
        name="sink log compaction",
        marker={"symbol": "diamond-open", "size": 13, "color": "#6f42c1"},
    )


def _interval_trace(points: list[TimelinePoint], times: list[datetime]) -> go.Scatter:
    gaps = [
        (later - earlier).total_seconds() if point.interval_ms is None else point.interval_ms / 1000
        for earlier, later, point in zip(times, times[1:], points[1:], strict=False)
    ]
    return go.Scatter(x=times[1:], y=gaps, mode="lines+markers", name="batch interval", line={"color": "#5cb85c"})


def _watermark_trace(points: list[TimelinePoint], times: list[datetime]) -> go.Scatter:
    # Spark writes 0 until the first watermark is known; that is "none", not 1970.
    marks = [(t, ms_to_datetime(p.watermark_ms)) for t, p in zip(times, points, strict=True) if p.watermark_ms > 0]
    return go.Scatter(
        x=[t for t, _ in marks],
        y=[w for _, w in marks],
        mode="lines+markers",
        name="watermark",
        line={"color": "#f0ad4e", "shape": "hv"},
    )


def compact_size_figure(sizes: Sequence[tuple[int, int]], outlook: CompactionOutlook | None) -> go.Figure:
    """Size of each compact file against its batch id, the fitted trend and the threshold."""
    figure = go.Figure()
    figure.add_trace(
        go.Scatter(x=[b for b, _ in sizes], y=[s for _, s in sizes], mode="lines+markers", name="compact file bytes")
    )
    if outlook is not None and sizes:
        _add_projection(figure, sizes, outlook)
    figure.update_layout(
        height=320,
        margin={"l": 60, "r": 20, "t": 30, "b": 40},
        legend={"orientation": "h"},
        xaxis_title="compaction batch id",
        yaxis_title="bytes",
    )
    return figure


def _add_projection(figure: go.Figure, sizes: Sequence[tuple[int, int]], outlook: CompactionOutlook) -> None:
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
    figure.add_trace(go.Scatter(x=list(xs), y=ys, mode="lines", name="trend", line={"dash": "dot", "color": "#888"}))
    if outlook.threshold_bytes <= 2 * max(max(s for _, s in sizes), *ys):
        figure.add_hline(
            y=outlook.threshold_bytes,
            line={"color": "#d9534f", "dash": "dash"},
            annotation_text="a compaction would outlast the trigger interval",
        )


@dataclass(frozen=True, slots=True)
class InventoryPoint:
    taken_at: datetime
    path: str
    size_bytes: int
    files: int


def inventory_growth_figure(points: Iterable[InventoryPoint]) -> go.Figure:
    """Bytes and files of each directory at each inventory pass: one line per directory."""
    by_path: dict[str, list[InventoryPoint]] = {}
    for point in points:
        by_path.setdefault(point.path or "(root)", []).append(point)
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08, subplot_titles=("Bytes", "Files"))
    for path, series in sorted(by_path.items()):
        times = [p.taken_at for p in series]
        figure.add_trace(
            go.Scatter(x=times, y=[p.size_bytes for p in series], mode="lines+markers", name=path, legendgroup=path),
            row=1,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=times,
                y=[p.files for p in series],
                mode="lines+markers",
                name=path,
                legendgroup=path,
                showlegend=False,
            ),
            row=2,
            col=1,
        )
    figure.update_layout(height=480, margin={"l": 60, "r": 20, "t": 40, "b": 40})
    return figure


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
# Above this many partitions the cells are too narrow for their numbers; hover still shows them.
HEATMAP_CELL_TEXT_LIMIT = 40


def state_heatmap_figure(points: Sequence[PartitionPoint]) -> go.Figure:
    """One column per partition, one row per figure, each row with its own colour scale, shown
    beside it (values differ by orders of magnitude between rows). An unknown value stays blank."""
    columns = [p.label for p in points]
    figure = make_subplots(rows=len(HEATMAP_METRICS), cols=1, shared_xaxes=True, vertical_spacing=0.04)
    for row, metric in enumerate(HEATMAP_METRICS, start=1):
        figure.add_trace(_heatmap_row(metric, [getattr(p, metric.attribute) for p in points], columns), row=row, col=1)
    _place_colorbars(figure)
    figure.update_xaxes(
        type="category", title_text="partition (operator/store/partition)", row=len(HEATMAP_METRICS), col=1
    )
    figure.update_layout(height=110 + 70 * len(HEATMAP_METRICS), margin={"l": 160, "r": 20, "t": 20, "b": 90})
    return figure


def _heatmap_row(metric: HeatmapMetric, values: list[int | None], columns: list[str]) -> go.Heatmap:
    known = [v for v in values if v is not None]
    top = max(known, default=0)
    if metric.alarm is None:
        colorscale, zmax = "Blues", top or 1
    else:
        colorscale, zmax = "YlOrRd", max(top, metric.alarm)
    text = ["?" if v is None else f"{v:,}" for v in values]
    return go.Heatmap(
        x=columns,
        y=[metric.label],
        z=[values],
        text=[text],
        zmin=0,
        zmax=zmax,
        colorscale=colorscale,
        texttemplate="%{text}" if len(columns) <= HEATMAP_CELL_TEXT_LIMIT else None,
        hovertemplate=f"partition %{{x}}<br>{metric.label}: %{{text}} {metric.unit}<extra></extra>",
        colorbar={"title": {"text": metric.unit, "side": "right"}, "thickness": 10, "tickformat": "~s", "nticks": 3},
    )


def _place_colorbars(figure: go.Figure) -> None:
    """Each row's colour bar beside that row (Plotly stacks them all at the right otherwise)."""
    for index, trace in enumerate(figure.data, start=1):
        low, high = figure.layout[f"yaxis{index if index > 1 else ''}"].domain
        trace.colorbar.update(y=(low + high) / 2, len=high - low, yanchor="middle")
