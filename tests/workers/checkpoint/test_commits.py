from __future__ import annotations

import pytest

from workers.checkpoint.commits import CommitMetadata, parse_commit

V1_NO_WATERMARK = CommitMetadata(version=1, next_batch_watermark_ms=0, state_unique_ids=None, sink_metadata=None)


def test_every_commit_fixture_is_a_version_1_commit_with_watermark_zero(spark_resources, commits_file):
    # All of them hold `v1` and either {"nextBatchWatermarkMs":0} or, from Spark 2.3.1, {}.
    data = (spark_resources / commits_file).read_bytes()
    assert parse_commit(data, source=commits_file) == V1_NO_WATERMARK


def test_spark_2_3_commit_with_empty_object_has_watermark_zero(spark_resources):
    relpath = "checkpoint-version-2.3.1-streaming-aggregate-state-format-1/commits/1"
    assert (spark_resources / relpath).read_bytes() == b"v1\n{}"
    assert parse_commit(b"v1\n{}", source=relpath).next_batch_watermark_ms == 0


@pytest.mark.parametrize("data", [b"v1", b"v1\n", b"v1\r\n"])
def test_commit_without_metadata_line_is_read_as_empty_object_like_commit_log(data):
    assert parse_commit(data, source="commits/0") == V1_NO_WATERMARK


def test_version_1_commit_gives_the_next_batch_watermark():
    commit = parse_commit(b'v1\n{"nextBatchWatermarkMs":1704067192000}', source="commits/0")
    assert commit.next_batch_watermark_ms == 1704067192000


def test_version_1_ignores_fields_of_later_versions_like_json4s():
    commit = parse_commit(b'v1\n{"nextBatchWatermarkMs":5,"stateUniqueIds":{"0":[["a"]]}}', source="commits/0")
    assert commit == CommitMetadata(version=1, next_batch_watermark_ms=5, state_unique_ids=None, sink_metadata=None)


def test_version_2_commit_gives_state_unique_ids_per_operator_and_partition():
    data = (
        b'v2\n{"nextBatchWatermarkMs":1704067192000,"stateUniqueIds":'
        b'{"0":[["cb8338b7-0000-4000-8000-000000000001"],["5e375161-0000-4000-8000-000000000002"]]}}'
    )
    assert parse_commit(data, source="commits/5") == CommitMetadata(
        version=2,
        next_batch_watermark_ms=1704067192000,
        state_unique_ids={0: [["cb8338b7-0000-4000-8000-000000000001"], ["5e375161-0000-4000-8000-000000000002"]]},
        sink_metadata=None,
    )


def test_version_2_commit_without_state_unique_ids_has_none():
    assert parse_commit(b'v2\n{"nextBatchWatermarkMs":3}', source="commits/5").state_unique_ids is None


def test_version_3_commit_gives_sink_metadata():
    data = (
        b'v3\n{"nextBatchWatermarkMs":42,"sinkMetadataMap":{"sink-0":'
        b'{"sinkName":"sink-0","commitOffset":"-","providerName":"memory","isActive":true}}}'
    )
    commit = parse_commit(data, source="commits/0")
    assert (commit.version, commit.next_batch_watermark_ms, commit.state_unique_ids) == (3, 42, None)
    assert commit.sink_metadata == {
        "sink-0": {"sinkName": "sink-0", "commitOffset": "-", "providerName": "memory", "isActive": True}
    }
