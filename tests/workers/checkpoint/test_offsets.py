from __future__ import annotations

import pytest

from workers.checkpoint.offsets import OffsetSeq, OffsetSeqMetadata, parse_offset_seq

HDFS_PROVIDER = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"


def test_spark_2_1_offset_log_fixture_has_two_sources_and_no_conf(spark_resources):
    data = (spark_resources / "offset-log-version-2.1.0/0").read_bytes()
    assert parse_offset_seq(data, source="offsets/0") == OffsetSeq(
        version=1,
        metadata=OffsetSeqMetadata(
            batch_watermark_ms=0,
            batch_timestamp_ms=1480981499528,
            conf={},
            source_metadata_info=None,
            raw='{"batchWatermarkMs":0,"batchTimestampMs":1480981499528}',
        ),
        offsets=('{"logOffset":345}', '{"topic-0":{"0":1}}'),
        source_ids=None,
    )


@pytest.mark.parametrize(
    ("relpath", "watermark_ms", "timestamp_ms", "offsets", "conf_keys"),
    [
        ("checkpoint-test-offsetId-commitId-inconsistent/offsets/0", 0, 1531292029003, ("0",), 2),
        ("checkpoint-test-offsetId-commitId-inconsistent/offsets/1", 5000, 1531292030005, ("1",), 2),
        ("checkpoint-test-offsetId-commitId-inconsistent/offsets/2", 5000, 1531292030005, ("2",), 2),
        ("checkpoint-test-offsetId-commitId-inconsistent/offsets/4", 5000, 1531292030005, ("4",), 2),
        ("checkpoint-version-2.1.0/offsets/0", 0, 1489180207737, ("0",), 0),
        ("checkpoint-version-2.1.0/offsets/1", 0, 1489180209261, ("2",), 0),
        ("checkpoint-version-2.3.1-streaming-aggregate-state-format-1/offsets/0", 0, 1533784347136, ("0",), 2),
        ("checkpoint-version-2.3.1-streaming-aggregate-state-format-1/offsets/1", 0, 1533784349160, ("1",), 2),
        ("checkpoint-version-2.4.0-streaming-join/offsets/0", 0, 1548845804202, ("0", "0"), 5),
        ("checkpoint-version-3.2.0-deduplication-with-repartition/offsets/0", 0, 1645693797622, ("0",), 8),
        ("checkpoint-version-3.2.0-deduplication-with-repartition/offsets/1", 0, 1645693802625, ("1",), 8),
        ("offset-log-version-2.1.0/0", 0, 1480981499528, ('{"logOffset":345}', '{"topic-0":{"0":1}}'), 0),
    ],
)
def test_offsets_fixture_gives_watermark_timestamp_and_offsets(
    spark_resources, relpath, watermark_ms, timestamp_ms, offsets, conf_keys
):
    offset_seq = parse_offset_seq((spark_resources / relpath).read_bytes(), source=relpath)
    assert offset_seq.version == 1
    assert offset_seq.metadata.batch_watermark_ms == watermark_ms
    assert offset_seq.metadata.batch_timestamp_ms == timestamp_ms
    assert offset_seq.offsets == offsets
    assert len(offset_seq.metadata.conf) == conf_keys


def test_conf_values_are_kept_as_the_strings_spark_wrote(spark_resources):
    relpath = "checkpoint-version-3.2.0-deduplication-with-repartition/offsets/0"
    conf = parse_offset_seq((spark_resources / relpath).read_bytes(), source=relpath).metadata.conf
    assert conf == {
        "spark.sql.streaming.stateStore.providerClass": HDFS_PROVIDER,
        "spark.sql.streaming.join.stateFormatVersion": "2",
        "spark.sql.streaming.stateStore.compression.codec": "lz4",
        "spark.sql.streaming.stateStore.rocksdb.formatVersion": "5",
        "spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion": "2",
        "spark.sql.streaming.multipleWatermarkPolicy": "min",
        "spark.sql.streaming.aggregation.stateFormatVersion": "2",
        "spark.sql.shuffle.partitions": "5",
    }


def test_empty_metadata_line_means_no_metadata_and_dash_means_no_offset():
    offset_seq = parse_offset_seq(b'v1\n\n{"logOffset":3}\n-', source="offsets/3")
    assert offset_seq == OffsetSeq(version=1, metadata=None, offsets=('{"logOffset":3}', None), source_ids=None)


def test_missing_metadata_fields_default_to_zero_like_offset_seq_metadata():
    metadata = parse_offset_seq(b"v1\n{}\n0", source="offsets/0").metadata
    assert (metadata.batch_watermark_ms, metadata.batch_timestamp_ms, metadata.conf) == (0, 0, {})


def test_offset_lines_are_kept_exactly_as_written():
    offset_seq = parse_offset_seq(b'v1\n{}\n {"a" : 1}\nnot json\n', source="offsets/0")
    assert offset_seq.offsets == (' {"a" : 1}', "not json")


def test_version_2_offset_map_keeps_source_ids_and_source_metadata_info():
    data = (
        b'v2\n{"batchWatermarkMs":7,"batchTimestampMs":1700000000000,"conf":{"spark.sql.shuffle.partitions":"2"},'
        b'"sourceMetadataInfo":{"0":{"sourceId":"0","providerName":"rate","apiVersion":"v2"}}}\n'
        b'0:{"offset":15,"timestamp":3000}\n'
        b"kafka-in:-"
    )
    offset_seq = parse_offset_seq(data, source="offsets/12")
    assert offset_seq.version == 2
    assert offset_seq.source_ids == ("0", "kafka-in")
    assert offset_seq.offsets == ('{"offset":15,"timestamp":3000}', None)
    assert offset_seq.metadata.batch_watermark_ms == 7
    assert offset_seq.metadata.conf == {"spark.sql.shuffle.partitions": "2"}
    assert offset_seq.metadata.source_metadata_info == {
        "0": {"sourceId": "0", "providerName": "rate", "apiVersion": "v2"}
    }


def test_version_2_splits_a_source_line_at_the_first_colon():
    offset_seq = parse_offset_seq(b'v2\n{}\nsrc:{"a":"b:c"}', source="offsets/1")
    assert (offset_seq.source_ids, offset_seq.offsets) == (("src",), ('{"a":"b:c"}',))
    assert offset_seq.metadata.source_metadata_info == {}
