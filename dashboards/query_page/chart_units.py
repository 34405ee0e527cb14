"""How charts write sizes and counts, and tell their series apart.

Sizes: a chart's byte axis is drawn in the largest of B, KB, MB, GB, TB that its largest value
reaches (1 KB = 1,024 bytes, as the tables' filesizeformat counts), and each hover reads
"4.2 KB", not "4.288k bytes". Counts (files, rows, batch ids) get whole-number ticks: Plotly
ticks a short range in halves otherwise ("0.5 files"). Series: one colour (and dash) each. Plain-dict
figures: plotly.py's default look, and panels stacked on one time axis. Durations: an axis in
the largest of its units that the longest value reaches ten of ("12.5 s", not "12,500 ms").
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
Figure = dict  # {"data": [trace, ...], "layout": {...}}, as Plotly.react takes them


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


# A line of more points than this is drawn without a marker per point: at that density the markers
# hide the line and tell no point apart, and each is an SVG element to draw (the timeline of a
# demo's hour, 826 batches, drew in 244 ms in chromium with its two lines bare, 315 ms with markers).
MARKERS_UP_TO_POINTS = 60


def line_mode(point_count: int) -> str:
    """Plotly's scatter mode for a line of ``point_count`` points."""
    return "lines+markers" if point_count <= MARKERS_UP_TO_POINTS else "lines"


SERIES_COLOURS = ("#2b7bb9", "#e07b00", "#5b8c3a", "#8a5a9e", "#d9534f", "#17becf", "#7f7f7f", "#bcbd22")
SERIES_DASHES = ("solid", "dash", "dot", "dashdot")


def series_line(index: int) -> dict:
    """The Plotly line of the ``index``-th series of a chart: its own colour and dash."""
    return {
        "color": SERIES_COLOURS[index % len(SERIES_COLOURS)],
        "dash": SERIES_DASHES[index // len(SERIES_COLOURS) % len(SERIES_DASHES)],
    }


# plotly.py's default template ("plotly"): what the page's charts look like. The figures are plain
# dicts (no template is sent), so they set the few of its properties that show.
PLOTLY_COLOURS = (
    "#636efa",
    "#EF553B",
    "#00cc96",
    "#ab63fa",
    "#FFA15A",
    "#19d3f3",
    "#FF6692",
    "#B6E880",
    "#FF97FF",
    "#FECB52",
)
AXIS_LOOK = {
    "gridcolor": "white",
    "linecolor": "white",
    "zerolinecolor": "white",
    "zerolinewidth": 2,
    "automargin": True,
}
PLOT_BACKGROUND = "#E5ECF6"
TEXT_COLOUR = "#2a3f5f"


def stacked_panels(titles: Sequence[str], *, spacing: float) -> dict:
    """The layout of ``len(titles)`` panels stacked on one shared x axis, each titled above, top first,
    as plotly.py's ``make_subplots(rows=n, cols=1, shared_xaxes=True, subplot_titles=titles)`` lays
    them out: panel ``r`` (from 1) draws on axes ``x<r>``/``y<r>`` (``x``/``y`` for the first); only the
    bottom x axis is ticked and the others follow it. An empty title draws none."""
    rows = len(titles)
    height = (1 - spacing * (rows - 1)) / rows
    layout = plain_layout()
    for row, title in enumerate(titles, start=1):
        top = 1 - (row - 1) * (height + spacing)
        layout[panel_axis_name("x", row)] = {
            "anchor": f"y{_axis_suffix(row)}",
            "domain": [0, 1],
            **({"matches": f"x{_axis_suffix(rows)}", "showticklabels": False} if row < rows else {}),
            **AXIS_LOOK,
        }
        layout[panel_axis_name("y", row)] = {
            "anchor": f"x{_axis_suffix(row)}",
            # Rounding leaves the bottom panel a hair below 0 (-3e-17), which Plotly's schema refuses.
            "domain": [max(top - height, 0.0), top],
            **AXIS_LOOK,
        }
        if title:
            layout["annotations"].append(_panel_title(title, top))
    return layout


def plain_layout() -> dict:
    """What a plain-dict figure's layout starts from: the few properties of plotly.py's default
    template that show (background, text colour)."""
    return {"plot_bgcolor": PLOT_BACKGROUND, "font": {"color": TEXT_COLOUR}, "annotations": []}


def panel_axes(row: int) -> dict:
    """A trace's axes in panel ``row`` (from 1) of ``stacked_panels``."""
    return {"xaxis": f"x{_axis_suffix(row)}", "yaxis": f"y{_axis_suffix(row)}"}


def panel_axis_name(letter: str, row: int) -> str:
    """The layout key of panel ``row``'s ``letter`` ("x" or "y") axis in ``stacked_panels``."""
    return f"{letter}axis{_axis_suffix(row)}"


def _axis_suffix(row: int) -> str:
    return "" if row == 1 else str(row)


def _panel_title(text: str, top: float) -> dict:
    return {
        "text": text,
        "showarrow": False,
        "xref": "paper",
        "yref": "paper",
        "x": 0.5,
        "y": top,
        "xanchor": "center",
        "yanchor": "bottom",
        "font": {"size": 16},
    }
