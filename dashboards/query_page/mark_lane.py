"""The marks of the Runtime charts: a lane above each plot, a row per kind of event, and a line (or
a band) across the plot for each. Pure: no request, no ORM.

Marks stay readable at any history length: past MAX_LINES_PER_KIND of a kind, its marks are
gathered in MAX_LINES_PER_KIND equal slices of the charts' time span, each slice holding any
drawn as one symbol with the count beside it on a band of its row from its first to its last mark;
its hover says how many and which batches, and a click narrows the page to them. A mark may
itself stand for several events (``count``), when the query that found them gathered them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

MAX_LINES_PER_KIND = 24  # lines of one kind past this read as a curtain, not as events
LANE_ROW_SHARE = 0.065  # of a chart's plot height, per kind of mark present


@dataclass(frozen=True, slots=True)
class RuntimeMark:
    """Something that happened at a moment of the query's history; ``kind`` is a key of MARK_STYLES.

    ``count`` above 1: that many events from ``time_ms`` (batch ``batch_id``) to ``last_time_ms``
    (batch ``last_batch_id``).
    """

    kind: str
    time_ms: int
    text: str
    batch_id: int | None = None
    link: str | None = None  # where a click goes; None: the batch page of batch_id
    count: int = 1
    last_time_ms: int | None = None
    last_batch_id: int | None = None

    @property
    def end_ms(self) -> int:
        return self.time_ms if self.last_time_ms is None else self.last_time_ms


@dataclass(frozen=True, slots=True)
class MarkStyle:
    label: str
    plural: str
    row: str  # the name of its row in a chart's lane of marks: short, the hover says the rest
    colour: str
    symbol: str


MARK_STYLES = {
    "restart": MarkStyle("query restart", "query restarts", "restart", "#d9534f", "triangle-down"),
    "conf": MarkStyle("pinned SQL conf changed", "pinned SQL conf changes", "conf change", "#8a3b00", "star"),
    "compaction": MarkStyle("log compaction", "log compactions", "compaction", "#6f42c1", "diamond"),
    "maintenance": MarkStyle("maintenance run", "maintenance runs", "maintenance", "#1f3a56", "square"),
    "snapshot": MarkStyle("state snapshot", "state snapshots", "snapshot", "#2d8a2d", "circle"),
    "finding": MarkStyle("integrity finding", "integrity findings", "finding", "#e08a00", "x"),
}


@dataclass(frozen=True, slots=True)
class MarkDecorations:
    traces: tuple[dict, ...]
    shapes: tuple[dict, ...]
    rows: tuple[str, ...]  # the lane's row labels, top row first


@dataclass(frozen=True, slots=True)
class _MarkGroup:
    """Marks of one kind drawn as one symbol: a single mark, or a slice of the span holding several."""

    marks: tuple[RuntimeMark, ...]

    @property
    def count(self) -> int:
        return sum(mark.count for mark in self.marks)

    @property
    def is_single(self) -> bool:
        return self.count == 1

    @property
    def first_ms(self) -> int:
        return self.marks[0].time_ms

    @property
    def last_ms(self) -> int:
        return max(mark.end_ms for mark in self.marks)

    @property
    def batches(self) -> tuple[int, int] | None:
        """The first and last batch of the group's events, when its marks name them."""
        ids = [b for mark in self.marks for b in (mark.batch_id, mark.last_batch_id) if b is not None]
        return (min(ids), max(ids)) if ids else None


def mark_decorations(marks: Sequence[RuntimeMark], span_ms: tuple[int, int]) -> MarkDecorations:
    """The marks' symbols (a row per kind in a lane above the plot, axis y2) and their lines or
    bands, for charts spanning ``span_ms``; built once for every figure."""
    kinds = [kind for kind in MARK_STYLES if any(m.kind == kind for m in marks)]
    traces, shapes = [], []
    for row, kind in enumerate(reversed(kinds)):
        style = MARK_STYLES[kind]
        groups = _grouped(sorted((m for m in marks if m.kind == kind), key=lambda m: m.time_ms), span_ms)
        traces.append(_lane_trace(style, groups, row))
        shapes += [_line_or_band(style, group, row) for group in groups]
    return MarkDecorations(tuple(traces), tuple(shapes), tuple(MARK_STYLES[kind].row for kind in kinds))


def _grouped(marks: list[RuntimeMark], span_ms: tuple[int, int]) -> list[_MarkGroup]:
    """Each mark alone, or past MAX_LINES_PER_KIND those of each equal slice of the span together."""
    if len(marks) <= MAX_LINES_PER_KIND:
        return [_MarkGroup((mark,)) for mark in marks]
    start, end = span_ms
    slice_ms = max(end - start, 1) / MAX_LINES_PER_KIND
    slices: dict[int, list[RuntimeMark]] = {}
    for mark in marks:
        index = min(max(int((mark.time_ms - start) / slice_ms), 0), MAX_LINES_PER_KIND - 1)
        slices.setdefault(index, []).append(mark)
    return [_MarkGroup(tuple(slices[index])) for index in sorted(slices)]


def _lane_trace(style: MarkStyle, groups: list[_MarkGroup], row: int) -> dict:
    return {
        "type": "scatter",
        "x": [(group.first_ms + group.last_ms) // 2 for group in groups],
        "y": [row] * len(groups),
        "yaxis": "y2",
        "mode": "markers+text",
        "name": style.label,
        "showlegend": False,
        "cliponaxis": False,
        "marker": {"symbol": style.symbol, "color": style.colour, "size": 10, "line": {"width": 1, "color": "#fff"}},
        "text": ["" if group.is_single else f"{group.count:,}" for group in groups],
        "textposition": "middle right",
        "textfont": {"size": 9, "color": style.colour},
        "hovertext": [_group_text(style, group) for group in groups],
        "hovertemplate": "%{hovertext}<extra></extra>",
        "customdata": [_group_link(group) for group in groups],
    }


def _group_text(style: MarkStyle, group: _MarkGroup) -> str:
    if len(group.marks) == 1:
        return group.marks[0].text
    batches = group.batches
    if batches is None:
        return (
            f"{group.count:,} {style.plural} from {_utc(group.first_ms)} to {_utc(group.last_ms)}: zoom in to see each"
        )
    where = f"from batch {batches[0]} to {batches[1]}"
    return f"{group.count:,} {style.plural} {where}: click to show these batches, or zoom in"


def _utc(moment_ms: int) -> str:
    return datetime.fromtimestamp(moment_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _group_link(group: _MarkGroup) -> str | int | None:
    """Where a click on the symbol goes: the mark's own page or batch, or a group's batch range."""
    if len(group.marks) == 1 and group.marks[0].count == 1:
        mark = group.marks[0]
        return mark.link if mark.link is not None else mark.batch_id
    batches = group.batches
    return f"?from={batches[0]}&to={batches[1]}#runtime" if batches else None


def _line_or_band(style: MarkStyle, group: _MarkGroup, row: int) -> dict:
    """A dotted line across the plot at a single mark; a group's time as a band in its lane row
    (across the plot, bands side by side would veil the whole of it)."""
    if group.is_single or group.first_ms == group.last_ms:
        line = {"color": style.colour, "width": 1 if group.is_single else 2, "dash": "dot"}
        across = {"xref": "x", "yref": "paper", "y0": 0, "y1": 1, "layer": "below"}
        return {"type": "line", "x0": group.first_ms, "x1": group.first_ms, "line": line, **across}
    return {
        "type": "rect",
        "xref": "x",
        "yref": "y2",
        "x0": group.first_ms,
        "x1": group.last_ms,
        "y0": row - 0.35,
        "y1": row + 0.35,
        "fillcolor": style.colour,
        "opacity": 0.2,
        "line": {"width": 0},
        "layer": "below",
    }


def add_lane(figure: dict, decorations: MarkDecorations) -> None:
    """The marks' lane on top of the plot, its rows named on the left; the lines cross the plot."""
    rows = len(decorations.rows)
    top_of_plot = 1 - LANE_ROW_SHARE * rows
    figure["data"] = figure["data"] + list(decorations.traces)
    figure["layout"]["shapes"] = list(decorations.shapes)
    figure["layout"]["yaxis"]["domain"] = [0, top_of_plot - 0.02]
    figure["layout"]["yaxis2"] = {
        "domain": [top_of_plot, 1],
        "range": [-0.7, rows - 0.3],
        "fixedrange": True,
        "showgrid": False,
        "zeroline": False,
        "tickvals": list(range(rows)),
        "ticktext": list(reversed(decorations.rows)),
        "tickfont": {"size": 9, "color": "#555"},
    }
