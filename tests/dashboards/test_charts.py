"""The query page's figures never mislead: no axes without data, one colour per series and every
colour in the legend, whole-number ticks for counts, sizes as people write them, every hover
naming its batch. Pure figure functions, checked on the figure's data and layout."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from dashboards.query_page.charts import (
    InventoryPoint,
    PartitionPoint,
    TimelinePoint,
    batch_timeline_figure,
    compact_size_figure,
    inventory_growth_figure,
    state_heatmap_figure,
)
from dashboards.query_page.compaction import CompactionOutlook
from workers.checkpoint.wording import format_size

START_MS = 1_700_000_000_000
# The directories of a stateful query's checkpoint with a file sink, as an inventory names them.
DIRECTORIES = (
    "",
    "commits",
    "offsets",
    "sources/0",
    "metadata",
    "state/0",
    "state/0/0",
    "state/0/1",
    "state/0/2",
    "state/0/3",
    "state/1/0",
    "_spark_metadata",
)


def _points(batches: int, *, watermark: bool = True) -> list[TimelinePoint]:
    """Batches every 20 s, the last one uncommitted, with a watermark 10 s behind if any."""
    return [
        TimelinePoint(b, START_MS + 20_000 * b, START_MS + 20_000 * b - 10_000 if watermark else 0, b < batches - 1)
        for b in range(batches)
    ]


def _timeline(points, **options) -> go.Figure:
    """The timeline figure through plotly.py's schema check (go.Figure raises ValueError naming a wrong property)."""
    return go.Figure(batch_timeline_figure(points, **options))


def _checked(figure: dict) -> go.Figure:
    """A plain-dict figure through plotly.py's schema check, read through its attributes."""
    return go.Figure(figure)


def _sentence(figure: go.Figure | dict) -> str:
    figure = go.Figure(figure)
    layout = figure.to_plotly_json()["layout"]
    assert figure.data == () and layout["xaxis"]["visible"] is False and layout["yaxis"]["visible"] is False
    return layout["meta"]["sentence"]


def test_a_checkpoint_without_batches_gets_a_sentence_instead_of_empty_timeline_axes():
    sentence = _sentence(_timeline([]))

    assert sentence.startswith("No batches in this range yet: the timeline starts once the query has written offsets/0")


def test_batches_without_a_start_time_are_said_to_be_off_the_time_axis():
    untimed = [TimelinePoint(b, 0, 0, True) for b in range(3)]

    sentence = _sentence(_timeline(untimed, has_untimed_batches=True))

    assert sentence.startswith("No batch here has a start time (Spark 2.0 wrote 0 as batchTimestampMs)")


def test_a_query_without_watermark_gets_no_empty_watermark_panel_and_a_note_saying_why():
    figure = _timeline(_points(5, watermark=False))

    texts = [annotation.text for annotation in figure.layout.annotations]
    assert texts[:2] == ["Batch id", "Interval since the previous batch (s)"]
    assert "Watermark (event time)" not in texts
    assert texts[-1].startswith("no watermark: Spark reports one for queries with withWatermark")
    assert [trace.name for trace in figure.data] == ["committed", "uncommitted", "batch interval"]


def test_a_single_batch_gets_no_empty_interval_panel_and_a_note_saying_why():
    figure = _timeline(_points(1))

    texts = [annotation.text for annotation in figure.layout.annotations]
    assert texts == ["Batch id", "Watermark (event time)", "no interval: a single timed batch"]


def test_every_timeline_hover_names_its_batch():
    figure = _timeline(_points(4), sink_compact_interval=2)

    by_name = {trace.name: trace for trace in figure.data}
    assert by_name["committed"].hovertemplate.startswith("batch %{y}, committed")
    assert by_name["uncommitted"].hovertemplate.startswith("batch %{y}, uncommitted")
    assert by_name["sink log compaction"].hovertemplate.startswith("batch %{y}: file sink log compaction")
    assert list(by_name["sink log compaction"].y) == [1, 3]
    assert by_name["batch interval"].hovertemplate.startswith("batch %{customdata}: %{y:,.3~f} s after")
    assert list(by_name["batch interval"].customdata) == [1, 2, 3]
    assert by_name["watermark"].hovertemplate.startswith("batch %{customdata}: watermark")
    assert list(by_name["watermark"].customdata) == [0, 1, 2, 3]


@pytest.mark.parametrize("batches", [4, 200])
def test_the_timelines_lines_mark_each_batch_while_they_can_be_told_apart_and_every_batch_keeps_its_dot(batches):
    by_name = {trace.name: trace for trace in _timeline(_points(batches)).data}

    for line in ("batch interval", "watermark"):
        assert len(by_name[line].x) in (batches - 1, batches)
        # Plotly draws a marker per point in "lines+markers" mode: dozens fit a panel, hundreds hide the line.
        assert by_name[line].mode == ("lines+markers" if batches < 50 else "lines"), (line, by_name[line].mode)
    assert by_name["committed"].mode == "markers" and len(by_name["committed"].x) == batches - 1


def test_an_interval_stands_over_the_time_since_the_previous_batch():
    # A batch an hour after the one before (an AvailableNow job, a query that waited for data):
    # Plotly's "vh" goes up at the earlier batch and holds the hour until this one.
    points = [TimelinePoint(b, START_MS + 1_000 * b + (3_600_000 if b >= 3 else 0), 0, True) for b in range(5)]

    interval = {trace.name: trace for trace in _timeline(points).data}["batch interval"]

    assert interval.line.shape == "vh"
    assert list(interval.y) == pytest.approx([1 / 60, 1 / 60, 60 + 1 / 60, 1 / 60])


def test_the_intervals_read_in_milliseconds_when_batches_follow_each_other_within_ten_seconds():
    points = [TimelinePoint(b, START_MS + 250 * b, 0, True) for b in range(4)]

    interval = _timeline(points).data[-1]

    assert list(interval.y) == [250, 250, 250]
    assert _timeline(points).layout.annotations[1].text == "Interval since the previous batch (ms)"


def test_a_few_batch_ids_are_ticked_at_whole_batches():
    yaxis = _timeline(_points(2)).layout.yaxis

    assert (yaxis.tickformat, yaxis.tick0, yaxis.dtick) == (",d", 0, 1)


def test_a_log_before_its_first_compaction_says_when_the_first_compact_file_comes():
    sentence = _sentence(compact_size_figure([], None, compact_interval=10))

    assert sentence == (
        "No compact file yet: Spark writes the first, 9.compact, at batch 9 of this log (compactInterval 10), "
        "then one every 10 batches."
    )


def test_compact_file_sizes_are_drawn_in_kb_and_hovered_as_people_write_them():
    figure = _checked(compact_size_figure([(9, 4_288), (19, 8_600)], None, compact_interval=10))

    (sizes,) = figure.data
    assert figure.layout.yaxis.title.text == "KB"
    assert list(sizes.y) == [4_288 / 1_024, 8_600 / 1_024]
    assert list(sizes.text) == ["4.2 KB", "8.4 KB"]
    assert sizes.hovertemplate == "batch %{x}: %{text}<extra></extra>"
    assert (figure.layout.xaxis.tickformat, figure.layout.xaxis.dtick) == (",d", None)  # batches 9 to 19


def test_sizes_read_in_the_unit_they_reach():
    assert [format_size(size) for size in (0, 512, 1_023, 1_024, 4_288, 5 * 1_024**2, 1_536 * 1_024**2)] == [
        "0 B",
        "512 B",
        "1,023 B",
        "1.0 KB",
        "4.2 KB",
        "5.0 MB",
        "1.5 GB",
    ]


def _inventory(directories=DIRECTORIES) -> list[InventoryPoint]:
    taken = datetime(2026, 11, 27, 12, tzinfo=UTC)
    return [
        InventoryPoint(taken + timedelta(hours=pass_), path, 1_000 * (index + 1) * (pass_ + 1), pass_ + 1)
        for pass_ in range(2)
        for index, path in enumerate(directories)
    ]


def test_the_files_chart_draws_each_directory_in_one_look_of_its_own_that_the_legend_shows():
    figure = _checked(inventory_growth_figure(_inventory()))

    looks = {}
    for trace in figure.data:
        looks.setdefault(trace.name, set()).add((trace.line.color, trace.line.dash))
    in_legend = {
        trace.name: (trace.line.color, trace.line.dash) for trace in figure.data if trace.showlegend is not False
    }
    assert sorted(in_legend) == sorted(path or "(root)" for path in DIRECTORIES)
    assert all(len(look) == 1 for look in looks.values())  # bytes and files of a directory alike
    assert len(set(in_legend.values())) == len(DIRECTORIES)  # commits and state/0 apart, and every other pair
    assert all(None not in look for look in in_legend.values())  # no colour left to Plotly's cycle


def test_file_counts_are_ticked_in_whole_files_and_sizes_in_their_unit():
    figure = _checked(inventory_growth_figure(_inventory(("commits",))))

    files_axis = figure.layout.yaxis2
    assert (files_axis.tickformat, files_axis.tick0, files_axis.dtick, files_axis.rangemode) == (
        ",d",
        0,
        1,
        "tozero",
    )
    assert [annotation.text for annotation in figure.layout.annotations] == ["Size (KB)", "Files"]
    assert list(figure.data[0].text) == ["1,000 B", "2.0 KB"]


def test_no_inventory_and_no_state_partitions_are_said_in_words():
    assert _sentence(inventory_growth_figure([])).startswith("No inventory yet: the next full pass counts")
    assert _sentence(state_heatmap_figure([])).startswith("No state store partitions read yet")


def test_the_state_heatmap_hovers_sizes_as_people_write_them_and_ticks_counts_whole():
    figure = _checked(
        state_heatmap_figure([PartitionPoint("0/default/0", 3, 4_288, 1, 1), PartitionPoint("0/default/1", 1, 0, 1, 1)])
    )

    by_label = {trace.y[0]: trace for trace in figure.data}
    size = by_label["bytes on disk"]
    assert list(size.text[0]) == ["4.2 KB", "0 B"]
    assert list(size.colorbar.ticktext) == ["0 B", "2.1 KB", "4.2 KB"]
    assert list(by_label["rows"].colorbar.tickvals) == [0, 2, 3]
    assert list(by_label["rows"].text[0]) == ["3", "1"]
    assert by_label["rows"].hovertemplate == "partition %{x}<br>rows: %{text} rows<extra></extra>"
    assert size.hovertemplate == "partition %{x}<br>bytes on disk: %{text}<extra></extra>"


def test_stacked_panels_are_laid_out_as_plotlys_make_subplots_lays_them():
    from plotly.subplots import make_subplots

    from dashboards.query_page.chart_units import stacked_panels

    for titles in (["a"], ["a", "b"], ["a", "b", "c"], ["", "", "", ""]):
        theirs = make_subplots(
            rows=len(titles),
            cols=1,
            shared_xaxes=True,
            vertical_spacing=0.06,
            subplot_titles=titles if titles[0] else None,
        ).to_plotly_json()["layout"]
        ours = stacked_panels(titles, spacing=0.06)
        assert len(ours["annotations"]) == len(theirs.get("annotations", ())), titles
        axes = [key for key in theirs if key.startswith(("xaxis", "yaxis"))]
        assert sorted(axes) == sorted(key for key in ours if key.startswith(("xaxis", "yaxis")))
        for key in axes:
            for name, value in theirs[key].items():
                assert ours[key][name] == pytest.approx(value), (titles, key, name)
        for title, annotation in zip(ours["annotations"], theirs.get("annotations", ()), strict=True):
            assert {k: title[k] for k in ("text", "x", "y", "xanchor", "yanchor")} == pytest.approx(
                {k: annotation[k] for k in ("text", "x", "y", "xanchor", "yanchor")}
            )


def test_the_compaction_threshold_is_drawn_as_plotlys_add_hline_draws_it():
    sizes = [(9, 100_000), (19, 400_000), (29, 900_000)]
    outlook = CompactionOutlook(
        bytes_per_batch=30_000,
        intercept_bytes=0,
        threshold_bytes=1_000_000,
        crossing_batch_id=34,
        time_to_crossing=None,
    )
    figure = compact_size_figure(sizes, outlook, compact_interval=10)
    unit_bytes = 1_024**2 if figure["layout"]["yaxis"]["title"]["text"] == "MB" else 1_024
    label = figure["layout"]["annotations"][-1]["text"]

    theirs = go.Figure()
    theirs.add_hline(y=1_000_000 / unit_bytes, line={"color": "#d9534f", "dash": "dash"}, annotation_text=label)
    theirs = theirs.to_plotly_json()["layout"]
    ours = _checked(figure).to_plotly_json()["layout"]
    assert ours["shapes"] == theirs["shapes"] and ours["annotations"][-1] == theirs["annotations"][-1]
    assert [trace.name for trace in _checked(figure).data] == ["compact file size", "trend"]


def test_each_heatmap_row_has_its_colour_bar_beside_it():
    figure = _checked(state_heatmap_figure([PartitionPoint(f"0/default/{n}", n, n * 1_000, n, n) for n in range(3)]))

    # The rows where plotly.py's make_subplots puts four panels on a shared x axis, not our own layout.
    from plotly.subplots import make_subplots

    theirs = make_subplots(rows=4, cols=1, shared_xaxes=True, vertical_spacing=0.04).layout
    for index, trace in enumerate(figure.data, start=1):
        low, high = theirs[f"yaxis{index if index > 1 else ''}"].domain
        assert (trace.colorbar.y, trace.colorbar.len) == pytest.approx(((low + high) / 2, high - low))
    assert figure.layout.xaxis4.title.text == "partition (operator/store/partition)"


def test_the_heatmap_colours_run_from_pale_to_dark_as_plotly_py_sends_its_named_scales():
    figure = _checked(state_heatmap_figure([PartitionPoint("0/default/0", 3, 4_288, 30, 1)]))
    by_label = {trace.y[0]: trace for trace in figure.data}

    # plotly.py turns a scale's name into its colours; plotly.js's scales of the same names run the other way.
    for label, name in (("delta chain", "YlOrRd"), ("versions since snapshot", "YlOrRd"), ("rows", "Blues")):
        theirs = [(stop, to_hex(colour)) for stop, colour in go.Heatmap(colorscale=name).colorscale]
        assert [(stop, colour) for stop, colour in by_label[label].colorscale] == theirs, label


def to_hex(rgb: str) -> str:
    return "#{:02x}{:02x}{:02x}".format(*(int(part) for part in rgb.removeprefix("rgb(").removesuffix(")").split(",")))
