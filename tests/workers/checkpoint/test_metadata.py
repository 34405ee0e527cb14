from __future__ import annotations

import pytest

from workers.checkpoint.errors import CorruptFileError
from workers.checkpoint.metadata import StreamMetadata, parse_stream_metadata


@pytest.mark.parametrize(
    ("relpath", "query_id"),
    [
        ("checkpoint-test-offsetId-commitId-inconsistent/metadata", "d4358946-170c-49a7-823b-d8e4e9126616"),
        ("checkpoint-version-2.1.0/metadata", "dddc5e7f-1e71-454c-8362-de184444fb5a"),
        (
            "checkpoint-version-2.3.1-streaming-aggregate-state-format-1/metadata",
            "2f32aca2-1b97-458f-a48f-109328724f09",
        ),
        ("checkpoint-version-2.4.0-streaming-join/metadata", "1ab1ee6f-993c-4a51-824c-1c7cc8202f62"),
        ("checkpoint-version-3.2.0-deduplication-with-repartition/metadata", "9538ada3-a233-4697-8b02-cc66250189a3"),
        # Spark 2.1 pretty-printed this file over three lines.
        ("query-metadata-logs-version-2.1.0.txt", "d366a8bf-db79-42ca-b5a4-d9ca0a11d63e"),
    ],
)
def test_metadata_fixture_gives_the_query_id(spark_resources, relpath, query_id):
    data = (spark_resources / relpath).read_bytes()
    assert parse_stream_metadata(data, source="metadata") == StreamMetadata(id=query_id)


def test_unknown_fields_are_ignored_like_json4s():
    data = b'{"id":"d4358946-170c-49a7-823b-d8e4e9126616","extra":[1]}'
    assert parse_stream_metadata(data, source="metadata").id == "d4358946-170c-49a7-823b-d8e4e9126616"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "metadata: the metadata file is empty"),
        (b'{"id":"abc"', "metadata: metadata: invalid JSON: Expecting ',' delimiter (at byte 11)"),
        (b'{"id":"\xff"}', "metadata: not UTF-8 text (at byte 7)"),
        (b'["abc"]', "metadata: metadata: expected a JSON object, found ['abc'] (at byte 0)"),
        (b"{}", "metadata: metadata: expected a non-empty string field 'id'"),
        (b'{"id":42}', "metadata: metadata: expected a non-empty string field 'id'"),
        (b'{"id":""}', "metadata: metadata: expected a non-empty string field 'id'"),
    ],
)
def test_corrupt_metadata_file_raises_corrupt_file_error(data, message):
    with pytest.raises(CorruptFileError) as raised:
        parse_stream_metadata(data, source="metadata")
    assert str(raised.value) == message
