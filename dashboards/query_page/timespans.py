"""Spans of time as people read them: "850 ms", "2.1 s", "12 min 5 s", "3 h 20 min", "4 d 2 h"."""

from __future__ import annotations

_UNITS = (("d", 86_400), ("h", 3_600), ("min", 60), ("s", 1))


def format_span(seconds: float) -> str:
    """Sub-second spans in milliseconds, a few seconds to a tenth, longer ones in their two largest units."""
    if 0 < seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10 and seconds != int(seconds):
        return f"{seconds:.1f} s"
    whole, parts = int(seconds), []
    for unit, size in _UNITS:
        count, whole = divmod(whole, size)
        if count or (unit == "s" and not parts):
            parts.append(f"{count} {unit}")
    return " ".join(parts[:2])
