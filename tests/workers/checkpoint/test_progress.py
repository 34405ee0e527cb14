"""workers.checkpoint.progress reads both progress shapes Spark writes, and nothing else.

The reference data is what PySpark 4.3.0 wrote: `recentProgress` JSON recorded beside each
committed fixture (`spark-report.json`, `tests/fixtures/event_logs/*-report.json`) and the
Jackson-shaped progress inside the committed plain event log.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES
from workers.checkpoint.errors import CheckpointError, CorruptFileError
from workers.checkpoint.logfile import JsonSite
from workers.checkpoint.progress import (
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryProgress,
    listener_event_from_dict,
    parse_streaming_query_progress,
    progress_from_dict,
)

EVENT_LOGS = OUR_FIXTURES / "event_logs"
PLAIN_REPORT = json.loads((EVENT_LOGS / "plain-report.json").read_text())
PLAIN_LOG = next((EVENT_LOGS / "plain").iterdir())
SPARK_2_0_EVENT_LOGS = sorted(SPARK_TEST_RESOURCES.glob("query-event-logs-version-2.0.*.txt"))
EPOCH_2024 = datetime(2024, 1, 1, tzinfo=UTC)
# The event-log query's source (pipelines/generate_event_log_fixture.py RATE): 6 rows per batch,
# event time 2024-01-01 + 4 s per batch.
ROWS_PER_BATCH = 6
QUERY_UUID, RUN_UUID = "ff1d0735-693d-429a-9ec2-c0ac91f92c73", "f746ab80-ce6c-469b-b122-87524ac272f8"
EVENT_TIME_STEP = timedelta(seconds=4)


def _recorded_progress() -> list[tuple[str, dict]]:
    """Every progress JSON recorded from PySpark's recentProgress, with an id naming its origin."""
    reports = sorted(OUR_FIXTURES.glob("*/spark-report.json")) + sorted(EVENT_LOGS.glob("*-report.json"))
    return [
        (f"{path.parent.name}/{path.name}#{index}", progress)
        for path in reports
        for index, progress in enumerate(json.loads(path.read_text())["progress"])
    ]


RECORDED = _recorded_progress()


def _event_log_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _jackson_progress() -> list[dict]:
    """The `progress` objects of the QueryProgressEvents in the committed plain event log."""
    return [event["progress"] for event in _event_log_lines(PLAIN_LOG) if "progress" in event]


def _rounded(rate: float | None) -> float | None:
    """Round like Spark's json (BigDecimal(rate).setScale(1, HALF_UP)) to compare the two shapes."""
    return None if rate is None else float(Decimal(repr(rate)).quantize(Decimal("0.1"), ROUND_HALF_UP))


# --- the JSON shape: StreamingQueryProgress.json as recorded from PySpark ---------------------------


@pytest.mark.parametrize("origin, recorded", RECORDED, ids=[origin for origin, _ in RECORDED])
def test_recorded_progress_reads_with_the_values_spark_wrote(origin, recorded):
    progress = parse_streaming_query_progress(json.dumps(recorded).encode(), source=origin)
    assert (progress.id, progress.run_id, progress.name) == (recorded["id"], recorded["runId"], recorded["name"])
    assert (progress.batch_id, progress.batch_duration_ms) == (recorded["batchId"], recorded["batchDuration"])
    assert progress.timestamp == datetime.fromisoformat(recorded["timestamp"])
    assert progress.duration_ms == recorded["durationMs"]
    assert progress.num_input_rows == recorded["numInputRows"]
    assert progress.input_rows_per_second == recorded.get("inputRowsPerSecond")
    assert progress.sink.num_output_rows == recorded["sink"]["numOutputRows"]
    assert [source.num_input_rows for source in progress.sources] == [s["numInputRows"] for s in recorded["sources"]]


@pytest.mark.parametrize("origin, recorded", RECORDED, ids=[origin for origin, _ in RECORDED])
def test_state_operator_metrics_read_as_spark_wrote_them(origin, recorded):
    progress = progress_from_dict(recorded, source=origin)
    assert len(progress.state_operators) == len(recorded["stateOperators"])
    for operator, written in zip(progress.state_operators, recorded["stateOperators"], strict=True):
        assert operator.operator_name == written["operatorName"]
        assert (operator.num_rows_total, operator.num_rows_updated, operator.num_rows_removed) == (
            written["numRowsTotal"],
            written["numRowsUpdated"],
            written["numRowsRemoved"],
        )
        assert operator.memory_used_bytes == written["memoryUsedBytes"]
        assert operator.num_shuffle_partitions == written["numShufflePartitions"]
        assert operator.custom_metrics == written.get("customMetrics", {})


def test_hdfs_state_store_custom_metrics_are_read():
    operator = progress_from_dict(PLAIN_REPORT["progress"][-1], source="report").state_operators[0]
    assert {"loadedMapCacheHitCount", "loadedMapCacheMissCount", "stateOnCurrentVersionSizeBytes"} <= set(
        operator.custom_metrics
    )


def test_every_batch_of_the_event_log_query_read_the_rows_of_one_rate_batch():
    progress = [progress_from_dict(p, source="report") for p in PLAIN_REPORT["progress"]]
    assert [p.batch_id for p in progress] == list(range(len(progress)))
    assert {p.num_input_rows for p in progress} == {ROWS_PER_BATCH}


def test_watermark_trails_the_previous_batch_event_time_by_two_seconds():
    # rate-micro-batch gives every row of batch k the event time start + k * advance; the query's
    # watermark delay is 2 s, and batch 0 runs with no watermark yet (the epoch).
    progress = [progress_from_dict(p, source="report") for p in PLAIN_REPORT["progress"]]
    step = EVENT_TIME_STEP
    assert progress[0].watermark == datetime(1970, 1, 1, tzinfo=UTC)
    assert [p.watermark for p in progress[1:]] == [
        EPOCH_2024 + (k - 1) * step - timedelta(seconds=2) for k in range(1, len(progress))
    ]
    assert [p.event_time["max"] for p in progress] == [EPOCH_2024 + k * step for k in range(len(progress))]


def test_offsets_are_compact_json_text():
    source = progress_from_dict(PLAIN_REPORT["progress"][1], source="report").sources[0]
    assert source.start_offset == '{"offset":6,"timestamp":1704067204000}'
    assert source.end_offset == '{"offset":12,"timestamp":1704067208000}'
    assert source.latest_offset is None


# --- the Jackson shape inside event logs ----------------------------------------------------------


def test_event_log_progress_leaves_out_the_derived_totals():
    # What makes the shape different; if Spark starts writing them, the summing path is untested.
    assert all("numInputRows" not in p and "inputRowsPerSecond" not in p for p in _jackson_progress())


@pytest.mark.parametrize("index", range(len(PLAIN_REPORT["progress"])))
def test_event_log_progress_equals_what_the_query_reported(index):
    from_log = progress_from_dict(_jackson_progress()[index], source="event log")
    reported = progress_from_dict(PLAIN_REPORT["progress"][index], source="report")
    assert _comparable(from_log) == _comparable(reported)


def _comparable(progress: StreamingQueryProgress) -> dict:
    """Every field, with rates rounded the way the JSON shape rounds them."""
    sources = [
        {
            **_fields(source),
            "input_rows_per_second": _rounded(source.input_rows_per_second),
            "processed_rows_per_second": _rounded(source.processed_rows_per_second),
        }
        for source in progress.sources
    ]
    return {
        **_fields(progress),
        "input_rows_per_second": _rounded(progress.input_rows_per_second),
        "processed_rows_per_second": _rounded(progress.processed_rows_per_second),
        "sources": sources,
    }


def _fields(value) -> dict:
    return {name: getattr(value, name) for name in value.__dataclass_fields__}


def test_nan_rates_written_as_strings_by_jackson_read_as_none():
    document = copy.deepcopy(_jackson_progress()[0])
    document["sources"][0]["inputRowsPerSecond"] = "NaN"
    progress = progress_from_dict(document, source="event log")
    assert progress.sources[0].input_rows_per_second is None
    assert progress.input_rows_per_second is None  # the sum over sources is NaN too


def test_unknown_fields_are_ignored():
    document = copy.deepcopy(PLAIN_REPORT["progress"][0])
    plain = progress_from_dict(document, source="report")
    document["futureField"] = {"anything": [1, 2]}
    document["stateOperators"][0]["futureMetric"] = 5
    assert progress_from_dict(document, source="report") == plain


def test_missing_optional_fields_are_none_as_in_spark_3_json():
    # Spark 3.5's json has no batchDuration; Spark 3.0 and older have no numShufflePartitions.
    document = copy.deepcopy(PLAIN_REPORT["progress"][0])
    del document["batchDuration"], document["stateOperators"][0]["numShufflePartitions"], document["sink"]
    progress = progress_from_dict(document, source="report")
    assert progress.batch_duration_ms is None
    assert progress.state_operators[0].num_shuffle_partitions is None
    assert progress.sink is None


# --- malformed progress: CorruptFileError naming the source and the field -------------------------


def _break(mutate):
    document = copy.deepcopy(PLAIN_REPORT["progress"][-1])
    mutate(document)
    return document


MALFORMED = {
    "batchId missing": (lambda d: d.pop("batchId"), "batchId"),
    "batchId a string": (lambda d: d.update(batchId="3"), "batchId"),
    "id a number": (lambda d: d.update(id=7), "id"),
    "timestamp not ISO": (lambda d: d.update(timestamp="yesterday"), "timestamp"),
    "timestamp without zone": (lambda d: d.update(timestamp="2024-01-01T00:00:00"), "timestamp"),
    "sources an object": (lambda d: d.update(sources={}), "sources"),
    "rate a string": (lambda d: d["sources"][0].update(inputRowsPerSecond="fast"), "inputRowsPerSecond"),
    "custom metric a string": (
        lambda d: d["stateOperators"][0]["customMetrics"].update(loadedMapCacheHitCount="1"),
        "loadedMapCacheHitCount",
    ),
    "eventTime value a number": (lambda d: d["eventTime"].update(watermark=0), "watermark"),
    "durationMs a list": (lambda d: d.update(durationMs=[1]), "durationMs"),
}


@pytest.mark.parametrize("mutate, field", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_progress_is_a_corrupt_file_error_naming_source_and_field(mutate, field):
    with pytest.raises(CorruptFileError) as raised:
        progress_from_dict(_break(mutate), source="ingest request 12")
    assert str(raised.value).startswith("ingest request 12: progress")
    assert field in raised.value.reason


@pytest.mark.parametrize(
    "data, reason",
    [(b"", "invalid JSON"), (b"[1, 2]", "expected a JSON object"), (b'{"id": "\xff"}', "not UTF-8")],
    ids=["empty", "a list", "not UTF-8"],
)
def test_bytes_that_are_no_progress_object_are_corrupt(data, reason):
    with pytest.raises(CorruptFileError, match=reason) as raised:
        parse_streaming_query_progress(data, source="progress.json")
    assert raised.value.path == "progress.json"


def test_a_progress_that_is_not_an_object_is_corrupt():
    with pytest.raises(CorruptFileError, match="expected a JSON object"):
        progress_from_dict(["not", "a", "progress"], source="ingest request")


def test_truncations_of_a_real_progress_raise_only_our_errors():
    data = json.dumps(PLAIN_REPORT["progress"][-1]).encode()
    for end in range(0, len(data), 7):
        with pytest.raises(CheckpointError) as raised:
            parse_streaming_query_progress(data[:end], source="cut.json")
        assert str(raised.value).startswith("cut.json: ")


# --- listener events --------------------------------------------------------------------------------


def _events(path) -> list:
    site = JsonSite(path.name, "event")
    return [listener_event_from_dict(fields, site) for fields in _event_log_lines(path)]


def test_event_log_lines_read_as_started_progress_and_terminated_events_of_the_query():
    events = [event for event in _events(PLAIN_LOG) if event is not None]
    started, *progress, terminated = events
    ids = (PLAIN_REPORT["query_id"], PLAIN_REPORT["run_id"])
    assert isinstance(started, QueryStartedEvent) and (started.id, started.run_id) == ids
    assert started.name == "event_log_plain"
    assert isinstance(terminated, QueryTerminatedEvent) and (terminated.id, terminated.run_id) == ids
    assert terminated.exception is None
    assert all(isinstance(event, QueryProgressEvent) for event in progress)
    assert [event.progress.batch_id for event in progress] == [p["batchId"] for p in PLAIN_REPORT["progress"]]


def test_other_spark_events_are_not_listener_events():
    lines = _event_log_lines(PLAIN_LOG)
    others = [fields for fields in lines if "StreamingQueryListener" not in fields["Event"]]
    assert others, "the fixture should hold task, job and SQL events"
    assert [listener_event_from_dict(fields, JsonSite("log", "event")) for fields in others] == [None] * len(others)


def idle_event(**fields) -> dict:
    """A QueryIdleEvent line of an event log; a field given as None is left out."""
    event = {
        "Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryIdleEvent",
        "id": QUERY_UUID,
        "runId": RUN_UUID,
        "timestamp": "2024-01-01T00:00:00.000Z",
        **fields,
    }
    return {key: value for key, value in event.items() if value is not None}


def test_query_idle_events_are_read_with_their_run_and_time():
    event = listener_event_from_dict(idle_event(), JsonSite("log", "event"))

    assert (event.id, event.run_id, event.timestamp.isoformat()) == (QUERY_UUID, RUN_UUID, "2024-01-01T00:00:00+00:00")


def test_a_query_idle_event_without_its_time_is_a_corrupt_line():
    with pytest.raises(CorruptFileError, match="timestamp"):
        listener_event_from_dict(idle_event(timestamp=None), JsonSite("log", "event"))


@pytest.mark.parametrize("path", SPARK_2_0_EVENT_LOGS, ids=lambda path: path.name)
def test_spark_2_0_listener_events_are_skipped(path):
    lines = _event_log_lines(path)
    assert any("StreamingQueryListener" in fields["Event"] for fields in lines)
    assert _events(path) == [None] * len(lines)


def test_a_progress_event_without_progress_is_corrupt():
    fields = {"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"}
    with pytest.raises(CorruptFileError, match="^events_1: line 9: a QueryProgressEvent without"):
        listener_event_from_dict(fields, JsonSite("events_1", "line 9"))


def test_a_started_event_without_run_id_is_corrupt():
    fields = {"Event": "org.apache.spark.sql.streaming.StreamingQueryListener$QueryStartedEvent", "id": QUERY_UUID}
    with pytest.raises(CorruptFileError, match="missing field 'runId'"):
        listener_event_from_dict(fields, JsonSite("events_1", "line 1"))


@pytest.mark.parametrize("field", ["id", "runId"])
def test_an_id_that_is_not_a_uuid_is_corrupt_naming_the_field(field):
    # Spark's query and run ids are java.util.UUIDs; another value cannot be a query's.
    with pytest.raises(CorruptFileError, match=f"events_1: line 1: '{field}' is not a UUID: 'query-7'"):
        listener_event_from_dict(idle_event(**{field: "query-7"}), JsonSite("events_1", "line 1"))


@pytest.mark.parametrize(
    ("written", "utc"),
    [
        ("2024-01-01T00:00:04.000Z", "2024-01-01T00:00:04+00:00"),
        # ISO-8601 allows offsets to 23:59; PostgreSQL stores at most about 15 hours.
        ("2024-01-01T22:49:00+22:49", "2024-01-01T00:00:00+00:00"),
    ],
)
def test_timestamps_are_read_as_utc_whatever_their_offset(written, utc):
    assert (
        listener_event_from_dict(idle_event(timestamp=written), JsonSite("log", "event")).timestamp.isoformat() == utc
    )


@pytest.mark.parametrize("written", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_timestamp_outside_years_1_to_9999_in_utc_is_corrupt(written):
    with pytest.raises(CorruptFileError, match="'timestamp' is outside years 1-9999 in UTC"):
        listener_event_from_dict(idle_event(timestamp=written), JsonSite("log", "event"))
