"""workers.checkpoint.lag: how far each source of a progress is behind its head.

Real progress comes from PySpark 4.3.0 (the recentProgress recorded beside each fixture and the
Jackson shape inside the committed event log): its rate-per-micro-batch and file sources leave
``latestOffset`` null, so they report no lag. Kafka cannot run here: its progress below is shaped
as Spark writes it, with the offsets of KafkaSourceOffset ({topic: {partition: offset}}) and the
metrics of KafkaMicroBatchStream.metrics (min/max as Long.toString, avg as Double.toString).
"""

from __future__ import annotations

import copy
import json

import pytest

from workers.checkpoint.errors import CorruptFileError
from workers.checkpoint.lag import LagBasis, SourceLag
from workers.checkpoint.logfile import JsonSite
from workers.checkpoint.progress import QUERY_PROGRESS_EVENT, listener_event_from_dict, progress_from_dict

from .test_progress import RECORDED, _jackson_progress

# Partitions 0, 1, 2 of "orders" end at 100, 200, 50 and have 130, 200, 80 at their head:
# 30, 0 and 30 offsets behind, 60 in all.
KAFKA_SOURCE = {
    "description": "KafkaV2[Subscribe[orders]]",
    "startOffset": {"orders": {"2": 40, "1": 180, "0": 90}},
    "endOffset": {"orders": {"2": 50, "1": 200, "0": 100}},
    "latestOffset": {"orders": {"2": 80, "1": 200, "0": 130}},
    "numInputRows": 40,
    "inputRowsPerSecond": 4.0,
    "processedRowsPerSecond": 20.0,
    "metrics": {"avgOffsetsBehindLatest": "20.0", "maxOffsetsBehindLatest": "30", "minOffsetsBehindLatest": "0"},
}
KAFKA_PROGRESS = {
    "id": "3f6e1b0e-7a43-4c57-9a8e-0b7c5d1d2e11",
    "runId": "9b1d7c55-2f0a-4a3e-8f65-1c2d3e4f5a6b",
    "name": "orders",
    "timestamp": "2026-11-27T10:00:00.000Z",
    "batchId": 41,
    "batchDuration": 2000,
    "numInputRows": 40,
    "durationMs": {"triggerExecution": 2000},
    "stateOperators": [],
    "sources": [KAFKA_SOURCE],
    "sink": {"description": "ConsoleTable", "numOutputRows": 40},
}


SITE = JsonSite("eventlog", "line 7")


def _kafka_progress(**source_changes) -> dict:
    progress = copy.deepcopy(KAFKA_PROGRESS)
    progress["sources"][0].update(source_changes)
    return progress


def _lags(progress: dict) -> list[SourceLag]:
    return [source.lag for source in progress_from_dict(progress, source="test").sources]


@pytest.mark.parametrize("origin, recorded", RECORDED, ids=[origin for origin, _ in RECORDED])
def test_spark_4_3_rate_and_file_sources_report_no_lag(origin, recorded):
    assert all(source.get("latestOffset") is None for source in recorded["sources"]), "Spark reported a head"
    assert _lags(recorded) == [SourceLag(None, LagBasis.NOT_REPORTED)] * len(recorded["sources"])


def test_event_log_progress_of_a_rate_source_reports_no_lag():
    for progress in _jackson_progress():
        event = listener_event_from_dict({"Event": QUERY_PROGRESS_EVENT, "progress": progress}, SITE)
        assert [source.lag for source in event.progress.sources] == [SourceLag(None, LagBasis.NOT_REPORTED)]


def test_kafka_lag_is_the_average_behind_latest_times_the_partitions():
    assert _lags(KAFKA_PROGRESS) == [SourceLag(60, LagBasis.KAFKA_METRICS)]


def test_kafka_lag_without_metrics_is_latest_minus_end_summed_over_partitions():
    assert _lags(_kafka_progress(metrics={})) == [SourceLag(60, LagBasis.OFFSETS)]


def test_kafka_lag_reads_the_same_from_the_event_log_shape():
    """Jackson writes offsets as strings holding JSON and keeps empty maps as {}."""
    source = {**KAFKA_SOURCE}
    for key in ("startOffset", "endOffset", "latestOffset"):
        source[key] = json.dumps(source[key])
    event = {"Event": QUERY_PROGRESS_EVENT, "progress": {**KAFKA_PROGRESS, "sources": [source]}}
    progress = listener_event_from_dict(event, SITE).progress
    assert [s.lag for s in progress.sources] == [SourceLag(60, LagBasis.KAFKA_METRICS)]


def test_a_partition_new_since_the_end_offset_is_left_out_of_the_sum():
    latest = {"orders": {"2": 80, "1": 200, "0": 130, "3": 7}}
    assert _lags(_kafka_progress(metrics={}, latestOffset=latest)) == [SourceLag(60, LagBasis.OFFSETS)]


def test_file_source_lag_is_the_difference_of_its_log_offsets():
    file_source = {"endOffset": {"logOffset": 7}, "latestOffset": {"logOffset": 9}, "metrics": {}}
    assert _lags(_kafka_progress(**file_source)) == [SourceLag(2, LagBasis.OFFSETS)]


def test_long_offsets_are_compared_as_numbers():
    assert _lags(_kafka_progress(endOffset=17, latestOffset=25, metrics={})) == [SourceLag(8, LagBasis.OFFSETS)]


@pytest.mark.parametrize(
    "changes",
    [
        {"latestOffset": None, "metrics": {}},
        {"endOffset": {"offset": 12, "timestamp": 1704067208000}, "latestOffset": {"offset": 18}, "metrics": {}},
        {"endOffset": "not json", "latestOffset": "not json either", "metrics": {}},
    ],
    ids=["no-head", "incomparable-offsets", "text-offsets"],
)
def test_sources_whose_offsets_cannot_be_compared_report_no_lag(changes):
    assert _lags(_kafka_progress(**changes)) == [SourceLag(None, LagBasis.NOT_REPORTED)]


@pytest.mark.parametrize("written", ["lots", "NaN", "-3.0"])
def test_an_average_behind_latest_that_is_no_count_is_an_error_naming_the_field(written):
    progress = _kafka_progress(metrics={**KAFKA_SOURCE["metrics"], "avgOffsetsBehindLatest": written})
    with pytest.raises(CorruptFileError) as error:
        progress_from_dict(progress, source="request body: progress")
    assert str(error.value).startswith("request body: progress: progress: source: metrics.avgOffsetsBehindLatest")
    assert repr(written) in str(error.value)
