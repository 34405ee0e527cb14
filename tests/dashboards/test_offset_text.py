"""Source offsets in words for the batch table, from offset logs Spark wrote."""

from __future__ import annotations

from dashboards.query_page.offset_text import describe_offset
from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES


def _offsets(path) -> list[str]:
    """The source offsets of an offset log file: the lines after the version and the metadata."""
    return path.read_text().splitlines()[2:]


def test_spark_s_file_source_and_kafka_offsets_read_as_words():
    file_source, kafka = _offsets(SPARK_TEST_RESOURCES / "offset-log-version-2.1.0" / "0")

    assert describe_offset(file_source) == "logOffset 345"
    assert describe_offset(kafka) == "topic-0: 1 partition at 1"


def test_a_rate_source_offset_shows_its_time_in_utc():
    [rate] = _offsets(OUR_FIXTURES / "windowed_agg_file_sink" / "checkpoint" / "offsets" / "11")

    assert describe_offset(rate) == "offset 120, timestamp 2024-01-01 00:00:24"


def test_many_kafka_partitions_show_their_range_and_other_offsets_stay_as_written():
    assert describe_offset('{"orders":{"0":10,"1":1200,"2":7}}') == "orders: 3 partitions at 7–1,200"
    assert describe_offset("-not json-") == "-not json-"
    assert describe_offset(None) == "-"
    assert describe_offset("42") == "42"
