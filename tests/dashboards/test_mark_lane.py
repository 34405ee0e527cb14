"""The marks of the Runtime charts stay readable at any history length: a line each while few, a
counted band per slice of the time span when dense, and never a mark dropped without a word."""

from __future__ import annotations

from dashboards.query_page.mark_lane import RuntimeMark, mark_decorations

START_MS = 1_700_000_000_000
MINUTE_MS = 60_000


def _compactions(count: int, *, every_ms: int) -> list[RuntimeMark]:
    """A file sink's compactions every 10 batches (batch 9, 19, ...), ``every_ms`` apart."""
    return [
        RuntimeMark("compaction", START_MS + i * every_ms, f"file sink log compaction: {10 * i + 9}", 10 * i + 9)
        for i in range(count)
    ]


def test_a_few_marks_keep_a_dotted_line_each_and_their_own_hover():
    marks = _compactions(5, every_ms=10 * MINUTE_MS)

    decorations = mark_decorations(marks, (START_MS, START_MS + 40 * MINUTE_MS))

    (lane,) = decorations.traces
    assert lane["x"] == [m.time_ms for m in marks]
    assert lane["hovertext"] == [f"file sink log compaction: {b}" for b in (9, 19, 29, 39, 49)]
    assert lane["customdata"] == [9, 19, 29, 39, 49]
    assert lane["text"] == [""] * 5
    assert [(s["type"], s["x0"], s["line"]["dash"]) for s in decorations.shapes] == [
        ("line", m.time_ms, "dot") for m in marks
    ]


def test_a_thousand_marks_in_forty_minutes_become_counted_bands_that_add_up_to_all_of_them():
    marks = _compactions(1_000, every_ms=2_400)  # 40 minutes

    decorations = mark_decorations(marks, (START_MS, START_MS + 2_400 * 999))

    (lane,) = decorations.traces
    counts = [int(text.replace(",", "")) for text in lane["text"]]
    assert len(lane["x"]) == 24 and sum(counts) == 1_000
    assert lane["hovertext"][0] == f"{counts[0]} log compactions from batch 9 to {10 * counts[0] - 1}: " + (
        "click to show these batches, or zoom in"
    )
    assert lane["customdata"][0] == f"?from=9&to={10 * counts[0] - 1}#runtime"
    assert lane["hovertext"][-1].endswith("to 9999: click to show these batches, or zoom in")
    assert {(shape["type"], shape["yref"]) for shape in decorations.shapes} == {("rect", "y2")}  # in the lane
    assert len(decorations.shapes) == 24
    assert decorations.shapes[0]["x0"] == START_MS and decorations.shapes[-1]["x1"] == START_MS + 2_400 * 999


def test_a_mark_that_stands_for_several_events_keeps_its_count_and_its_words():
    run = RuntimeMark(
        "compaction",
        START_MS,
        "37 file sink log compactions, batches 9 to 369",
        9,
        count=37,
        last_time_ms=START_MS + 5 * MINUTE_MS,
        last_batch_id=369,
    )

    decorations = mark_decorations([run], (START_MS, START_MS + 60 * MINUTE_MS))

    (lane,) = decorations.traces
    assert (lane["text"], lane["hovertext"], lane["customdata"]) == (
        ["37"],
        ["37 file sink log compactions, batches 9 to 369"],
        ["?from=9&to=369#runtime"],
    )
    assert [(s["type"], s["x0"], s["x1"]) for s in decorations.shapes] == [("rect", START_MS, START_MS + 5 * MINUTE_MS)]


def test_dense_marks_without_batches_are_counted_without_a_batch_range():
    runs = [
        RuntimeMark("maintenance", START_MS + i * MINUTE_MS, f"maintenance #{i}", None, f"/runs/{i}") for i in range(50)
    ]

    (lane,) = mark_decorations(runs, (START_MS, START_MS + 49 * MINUTE_MS)).traces

    assert sum(int(text or 1) for text in lane["text"]) == 50
    # START_MS is 2023-11-14 22:13:20 UTC; the first slice of 49/24 minutes holds runs 0 to 2.
    assert lane["hovertext"][0] == (
        "3 maintenance runs from 2023-11-14 22:13:20 UTC to 2023-11-14 22:15:20 UTC: zoom in to see each"
    )
    assert lane["customdata"] == [None] * len(lane["x"])
