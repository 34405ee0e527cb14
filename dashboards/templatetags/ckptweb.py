"""Template filters of the dashboards."""
from __future__ import annotations

from datetime import timedelta

from django import template
from django.utils import timezone

register = template.Library()

_UNITS = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))


@register.filter
def duration(value: timedelta | float | int | None) -> str:
    """A span in its two largest units: "45 s", "12 min 5 s", "3 h 20 min", "4 d 2 h"."""
    if value is None:
        return "—"
    seconds = int(value.total_seconds() if isinstance(value, timedelta) else value)
    parts = []
    for unit, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count or (unit == "s" and not parts):
            parts.append(f"{count} {unit}")
    return " ".join(parts[:2])


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
