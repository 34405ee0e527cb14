from datetime import timedelta

import pytest

from dashboards.templatetags.ckptweb import duration, size, span_ms


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(0), "0 s"),
        (45, "45 s"),
        (timedelta(minutes=12, seconds=5), "12 min 5 s"),
        (timedelta(hours=3, minutes=20, seconds=9), "3 h 20 min"),
        (timedelta(days=4, hours=2), "4 d 2 h"),
        (timedelta(days=1, seconds=30), "1 d 30 s"),
        (None, "—"),
    ],
)
def test_duration_shows_the_two_largest_units(value, text):
    assert duration(value) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(microseconds=61_705), "62 ms"),  # a sync run's duration read "0:00:00.061705"
        (0.25, "250 ms"),
        (timedelta(seconds=4, milliseconds=500), "4.5 s"),
        (timedelta(minutes=2, seconds=5, milliseconds=300), "2 min 5 s"),
    ],
)
def test_duration_writes_a_span_under_ten_seconds_as_people_do(value, text):
    assert duration(value) == text


@pytest.mark.parametrize(
    ("size_bytes", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1_023, "1,023 B"),
        (1_024, "1.0 KB"),
        (4_403, "4.3 KB"),
        (1_572_864, "1.5 MB"),
        (3 * 1_024**3 + 1, "3.0 GB"),
        (2_048 * 1_024**4, "2,048.0 TB"),
        (None, "—"),
    ],
)
def test_size_writes_bytes_in_the_largest_unit_they_reach(size_bytes, text):
    assert size(size_bytes) == text


def test_ago_counts_seconds_under_a_minute(monkeypatch):
    from django.utils import timezone

    from dashboards.templatetags.ckptweb import ago

    # A fixed clock: on a loaded machine more than 0.7 s may pass between the test's now and
    # ago's, which would read "13 s ago".
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    assert ago(now - timedelta(seconds=12, milliseconds=300)) == "12 s ago"
    assert ago(now - timedelta(hours=3, minutes=20, seconds=5)) == "3 h 20 min ago"
    assert ago(None) == "never"


@pytest.mark.parametrize(
    ("milliseconds", "text"), [(0, "0 ms"), (1, "1 ms"), (850, "850 ms"), (2100, "2.1 s"), (None, "—")]
)
def test_a_span_in_milliseconds_keeps_zero_in_milliseconds(milliseconds, text):
    # "1 ms against 0 s" on the batch page read as two units.
    assert span_ms(milliseconds) == text


def _circles_and_lines(svg: str) -> tuple[list[tuple[float, float]], list[str]]:
    import re

    circles = [(float(x), float(y)) for x, y in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg)]
    return circles, re.findall(r'<polyline points="([^"]*)"', svg)


def test_a_query_one_minute_old_shows_a_dot_inside_the_sparkline():
    """One minute of batches is one point: a polyline of one point draws nothing, so the dot does."""
    from dashboards.list_page.trends import TREND_MINUTES, Trend
    from dashboards.templatetags.ckptweb import SPARK_HEIGHT, SPARK_WIDTH, sparkline

    circles, _ = _circles_and_lines(sparkline(Trend(((TREND_MINUTES, 480.0),), TREND_MINUTES)))

    assert len(circles) == 1
    (x, y) = circles[0]
    radius = 2
    assert radius <= x <= SPARK_WIDTH - radius and radius <= y <= SPARK_HEIGHT - radius


def test_the_dot_marks_the_newest_minute_and_the_hour_spans_the_width():
    from dashboards.list_page.trends import Trend
    from dashboards.templatetags.ckptweb import SPARK_HEIGHT, SPARK_WIDTH, sparkline

    circles, lines = _circles_and_lines(sparkline(Trend(((0, 900.0), (30, 100.0), (60, 500.0)), 60)))

    xs = [float(pair.split(",")[0]) for pair in lines[0].split()]
    [(dot_x, dot_y)] = circles
    assert dot_x > SPARK_WIDTH * 0.9, "the newest minute (60 of 60) sits at the right end"
    assert abs(dot_y - SPARK_HEIGHT / 2) < 0.5, "500 ms is halfway between the low (100) and the high (900)"
    assert xs[0] < SPARK_WIDTH * 0.1 and xs[-1] > SPARK_WIDTH * 0.9, "the hour's ends sit at the svg's ends"
    assert abs(xs[1] - (xs[0] + xs[2]) / 2) < 0.1, "minute 30 halfway"
