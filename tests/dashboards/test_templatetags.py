from datetime import timedelta

import pytest

from dashboards.templatetags.ckptweb import duration, span_ms


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


def test_ago_counts_seconds_under_a_minute():
    from django.utils import timezone

    from dashboards.templatetags.ckptweb import ago

    assert ago(timezone.now() - timedelta(seconds=12, milliseconds=300)) == "12 s ago"
    assert ago(timezone.now() - timedelta(hours=3, minutes=20, seconds=5)) == "3 h 20 min ago"
    assert ago(None) == "never"


@pytest.mark.parametrize(
    ("milliseconds", "text"), [(0, "0 ms"), (1, "1 ms"), (850, "850 ms"), (2100, "2.1 s"), (None, "—")]
)
def test_a_span_in_milliseconds_keeps_zero_in_milliseconds(milliseconds, text):
    # "1 ms against 0 s" on the batch page read as two units.
    assert span_ms(milliseconds) == text
