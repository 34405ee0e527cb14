"""How charts write sizes and counts, and tell their series apart.

Sizes: a chart's byte axis is drawn in the largest of B, KB, MB, GB, TB that its largest value
reaches (1 KB = 1,024 bytes, as the tables' filesizeformat counts), and each hover reads
"4.2 KB", not "4.288k bytes". Counts (files, rows, batch ids) get whole-number ticks: Plotly
ticks a short range in halves otherwise ("0.5 files"). Series: one colour (and dash) each.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

BYTES_PER_KB = 1_024
# A count axis spanning fewer units than this is ticked at every whole number; Plotly picks a
# whole-number step of its own above it (its six or so ticks are then at least one apart).
WHOLE_TICKS_BELOW_SPAN = 8


@dataclass(frozen=True, slots=True)
class SizeUnit:
    name: str
    bytes: int

    @classmethod
    def for_largest(cls, largest_bytes: float | None) -> SizeUnit:
        """The largest unit that ``largest_bytes`` reaches (bytes when it is None or below 1 KB)."""
        fitting = [unit for unit in SIZE_UNITS if largest_bytes is not None and largest_bytes >= unit.bytes]
        return fitting[-1] if fitting else SIZE_UNITS[0]


SIZE_UNITS = tuple(SizeUnit(name, BYTES_PER_KB**power) for power, name in enumerate(("B", "KB", "MB", "GB", "TB")))


def count_axis(values: Iterable[float | None]) -> dict:
    """Plotly axis properties for counts: whole-number ticks, from zero (a range around a constant
    count would be ticked in halves, each written as a whole number twice)."""
    return {"rangemode": "tozero", **whole_number_ticks(values, floor=0)}


def whole_number_ticks(values: Iterable[float | None], *, floor: float | None = None) -> dict:
    """Plotly axis properties that tick ``values`` (ids, counts) at whole numbers only.

    ``floor``: where the axis starts whatever the values (0 for counts); None: at the lowest value.
    """
    known = [value for value in values if value is not None]
    low = min(known, default=0) if floor is None else floor
    span = max(known, default=0) - low
    ticks = {"tickformat": ",d"}
    if span < WHOLE_TICKS_BELOW_SPAN:
        ticks.update(tick0=0, dtick=1)
    return ticks


# Series told apart by colour, then, past the colours, by dash: a chart with more series than
# colours still draws every one differently, and every colour of a chart is in its legend.
SERIES_COLOURS = ("#2b7bb9", "#e07b00", "#5b8c3a", "#8a5a9e", "#d9534f", "#17becf", "#7f7f7f", "#bcbd22")
SERIES_DASHES = ("solid", "dash", "dot", "dashdot")


def series_line(index: int) -> dict:
    """The Plotly line of the ``index``-th series of a chart: its own colour and dash."""
    return {
        "color": SERIES_COLOURS[index % len(SERIES_COLOURS)],
        "dash": SERIES_DASHES[index // len(SERIES_COLOURS) % len(SERIES_DASHES)],
    }
