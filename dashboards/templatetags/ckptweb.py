"""Template filters of the dashboards."""

from __future__ import annotations

import json
from datetime import timedelta
from urllib.parse import urlencode

from django import template
from django.template.loader import render_to_string
from django.utils import timezone

from dashboards.query_page.offset_text import describe_offset
from dashboards.query_page.timespans import format_span
from workers.checkpoint.wording import format_size

register = template.Library()


@register.filter
def duration(value: timedelta | float | int | None) -> str:
    """A span (a timedelta, or seconds) as people write it: "62 ms", "4.5 s", "12 min 5 s", "3 h 20 min"."""
    if value is None:
        return "—"
    return format_span(value.total_seconds() if isinstance(value, timedelta) else value)


@register.filter
def size(size_bytes: int | float | None) -> str:
    """A byte count as people write it: "512 B", "4.3 KB", "1.5 GB" ("—" for None)."""
    return "—" if size_bytes is None else format_size(size_bytes)


@register.filter
def state_cell(value) -> str:
    """A decoded state value as text: null, numbers and strings as they are, arrays and maps as JSON."""
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value).lower() if isinstance(value, bool) else str(value)


@register.filter
def ago(moment) -> str:
    """How long ago ``moment`` was, to the second under a minute ("12 s ago", "3 h 20 min ago")."""
    if moment is None:
        return "never"
    return f"{format_span(int(max(timezone.now() - moment, timedelta(0)).total_seconds()))} ago"


@register.filter
def utc_seconds(moment) -> str:
    """An aware UTC datetime as "2026-11-25 08:03:11" ("—" for None); strftime, as a 50-row table
    pays Django's localising date filter 100 times."""
    return "—" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")


SPARK_WIDTH, SPARK_HEIGHT = 120, 24
# Room at each edge for the newest point's dot and the line's width.
SPARK_PAD = 3


@register.simple_tag
def sparkline(trend) -> str:
    """An inline SVG line of a Trend (dashboards.list_page.trends): batch duration per minute, last hour.

    The vertical scale runs from the trend's own low to its high (said in the tooltip and the
    accessible label), so the line shows the shape, and the words give the values. The time axis
    is the whole hour for every row, so rows compare, drawn as a faint line under the trend; a dot
    marks the newest minute, so a query that started a minute ago (one point, no line) still
    shows, at the right end of that hour. The markup is the template ``partials/sparkline.html``.
    """
    figure = None if trend is None or not trend.points else sparkline_figure(trend)
    return render_to_string("dashboards/partials/sparkline.html", {"figure": figure})


def sparkline_figure(trend) -> dict:
    """The sparkline's geometry and words: SVG size, axis, polyline points, newest point, scale."""
    low, high = trend.low, trend.high
    points = _sparkline_points(trend)
    low_text, high_text = format_span(low / 1000), format_span(high / 1000)
    return {
        "width": SPARK_WIDTH,
        "height": SPARK_HEIGHT,
        "axis_left": SPARK_PAD,
        "axis_right": SPARK_WIDTH - SPARK_PAD,
        "axis_y": SPARK_HEIGHT - 1,
        "coordinates": " ".join(f"{x:.1f},{y:.1f}" for x, y in points),
        "newest_x": f"{points[-1][0]:.1f}",
        "newest_y": f"{points[-1][1]:.1f}",
        "label": f"batch duration per minute, last hour: {low_text} to {high_text}",
        "low": low_text,
        "high": high_text,
    }


def _sparkline_points(trend) -> list[tuple[float, float]]:
    """Each (minute, value) of the trend as SVG coordinates inside the padded box, low to high upwards."""
    low, high = trend.low, trend.high
    spread = (high - low) or 1.0
    return [
        (
            SPARK_PAD + minute * (SPARK_WIDTH - 2 * SPARK_PAD) / trend.minutes,
            SPARK_HEIGHT - SPARK_PAD - (value - low) / spread * (SPARK_HEIGHT - 2 * SPARK_PAD),
        )
        for minute, value in trend.points
    ]


@register.filter
def span_ms(milliseconds: int | float | None) -> str:
    """Milliseconds as a span: "850 ms", "2.1 s", "3 min 5 s" ("—" for None).

    Zero stays in milliseconds: beside "1 ms", "0 s" reads as another unit."""
    if milliseconds is None:
        return "—"
    return "0 ms" if milliseconds == 0 else format_span(milliseconds / 1000)


@register.simple_tag
def querystring_of(list_request, **changes) -> str:
    """The list's URL parameters with ``changes`` (status=..., sort=...), page reset."""
    return urlencode(list_request.as_query(**changes))


@register.simple_tag
def sort_header(list_request, key: str, label: str) -> str:
    """A column header that sorts the list by ``key``; says the current order to screen readers too."""
    current = list_request.sort == key
    order = ("descending" if list_request.descending else "ascending") if current else "none"
    arrow = ("▼" if list_request.descending else "▲") if current else ""
    href = "?" + urlencode(list_request.sorted_by(key))
    context = {"order": order, "href": href, "key": key, "label": label, "arrow": arrow}
    return render_to_string("dashboards/partials/sort_header.html", context)


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if mapping else None


@register.filter
def readable_offset(raw: str | None) -> str:
    """A source offset from the offset log in words (dashboards/query_page/offset_text.py)."""
    return describe_offset(raw)


@register.filter
def spread_of_ms(spread) -> str:
    """A run_summary.Spread of milliseconds as "120 ms / 300 ms / 1.2 s / 2 s" ("—" for None)."""
    if spread is None:
        return "—"
    return " / ".join(format_span(value / 1000) for value in (spread.low, spread.median, spread.p95, spread.high))


@register.filter
def spread_of_rates(spread) -> str:
    """A run_summary.Spread of rows per second as "0.0 / 5.1 / 9.9 / 12.0" ("—" for None)."""
    if spread is None:
        return "—"
    return " / ".join(f"{value:,.1f}" for value in (spread.low, spread.median, spread.p95, spread.high))
