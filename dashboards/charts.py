"""Rows to Plotly figures. Pure: no request, no ORM."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .models import ms_to_datetime


@dataclass(frozen=True, slots=True)
class TimelinePoint:
    batch_id: int
    timestamp_ms: int
    watermark_ms: int
    is_committed: bool


def batch_timeline_figure(points: Iterable[TimelinePoint]) -> go.Figure:
    """Batch id, interval since the previous batch, and the watermark, against batch start time.

    Batches without a timestamp (Spark 2.0-era logs wrote 0) cannot be placed on a time axis and
    are left out.
    """
    timed = [p for p in points if p.timestamp_ms > 0]
    times = [ms_to_datetime(p.timestamp_ms) for p in timed]
    figure = make_subplots(
        rows=3, cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=("Batch id", "Seconds since previous batch", "Watermark (event time)"),
    )
    figure.add_trace(_batch_trace(timed, times, committed=True), row=1, col=1)
    figure.add_trace(_batch_trace(timed, times, committed=False), row=1, col=1)
    figure.add_trace(_interval_trace(timed, times), row=2, col=1)
    figure.add_trace(_watermark_trace(timed, times), row=3, col=1)
    figure.update_layout(height=620, margin={"l": 60, "r": 20, "t": 40, "b": 40}, legend={"orientation": "h"})
    return figure


def _batch_trace(points: list[TimelinePoint], times: list[datetime], *, committed: bool) -> go.Scatter:
    chosen = [(t, p.batch_id) for t, p in zip(times, points) if p.is_committed == committed]
    return go.Scatter(
        x=[t for t, _ in chosen], y=[b for _, b in chosen], mode="markers",
        name="committed" if committed else "uncommitted",
        marker={"color": "#2b7bb9" if committed else "#d9534f", "size": 6 if committed else 10},
    )


def _interval_trace(points: list[TimelinePoint], times: list[datetime]) -> go.Scatter:
    gaps = [(later - earlier).total_seconds() for earlier, later in zip(times, times[1:])]
    return go.Scatter(x=times[1:], y=gaps, mode="lines+markers", name="batch interval", line={"color": "#5cb85c"})


def _watermark_trace(points: list[TimelinePoint], times: list[datetime]) -> go.Scatter:
    # Spark writes 0 until the first watermark is known; that is "none", not 1970.
    marks = [(t, ms_to_datetime(p.watermark_ms)) for t, p in zip(times, points) if p.watermark_ms > 0]
    return go.Scatter(
        x=[t for t, _ in marks], y=[w for _, w in marks], mode="lines+markers", name="watermark",
        line={"color": "#f0ad4e", "shape": "hv"},
    )
