"""Template filters of the dashboards."""
from __future__ import annotations

from datetime import timedelta

from django import template
from django.utils import timezone

from ..timespans import format_span

register = template.Library()

@register.filter
def duration(value: timedelta | float | int | None) -> str:
    """A span in its two largest units: "45 s", "12 min 5 s", "3 h 20 min", "4 d 2 h"."""
    if value is None:
        return "—"
    return format_span(int(value.total_seconds() if isinstance(value, timedelta) else value))


@register.filter
def ago(moment) -> str:
    """How long ago ``moment`` was, to the second under a minute ("12 s ago", "3 h 20 min ago")."""
    if moment is None:
        return "never"
    return f"{duration(max(timezone.now() - moment, timedelta(0)))} ago"


@register.filter
def utc_seconds(moment) -> str:
    """An aware UTC datetime as "2026-11-25 08:03:11" ("—" for None); strftime, as a 50-row table
    pays Django's localising date filter 100 times."""
    return "—" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S")
