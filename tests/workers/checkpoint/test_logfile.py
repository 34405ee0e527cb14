from __future__ import annotations

import pytest

from workers.checkpoint.errors import CorruptFileError, IncompleteLogFileError, UnsupportedVersionError
from workers.checkpoint.logfile import JsonSite, LogFile, parse_json_object, parse_json_value, parse_log_file


def test_spark_2_1_offsets_file_with_trailing_newline_splits_into_three_lines(spark_resources):
    data = (spark_resources / "offset-log-version-2.1.0/0").read_bytes()
    log = parse_log_file(data, source="offsets/0", max_version=1)
    assert log == LogFile(
        version=1,
        lines=(
            '{"batchWatermarkMs":0,"batchTimestampMs":1480981499528}',
            '{"logOffset":345}',
            '{"topic-0":{"0":1}}',
        ),
        line_offsets=(3, 59, 77),
    )


@pytest.mark.parametrize(
    ("relpath", "line_count", "first_line"),
    [
        (
            "file-sink-log-version-2.1.0/7.compact",
            8,
            '{"path":"/a/b/0","size":1,"isDir":false,"modificationTime":1,"blockReplication":1,'
            '"blockSize":100,"action":"add"}',
        ),
        (
            "file-sink-log-version-2.1.0/9",
            1,
            '{"path":"/a/b/9","size":900,"isDir":false,"modificationTime":900,"blockReplication":3,'
            '"blockSize":200,"action":"add"}',
        ),
        ("file-source-log-version-2.1.0/2.compact", 3, '{"path":"/a/b/0","timestamp":1480730949000,"batchId":0}'),
        ("file-source-log-version-2.1.0/4", 1, '{"path":"/a/b/4","timestamp":1480730951000,"batchId":4}'),
    ],
)
def test_compactible_logs_of_spark_2_1_share_the_version_line_framing(spark_resources, relpath, line_count, first_line):
    data = (spark_resources / relpath).read_bytes()
    log = parse_log_file(data, source=relpath, max_version=1)
    assert (log.version, len(log.lines), log.lines[0]) == (1, line_count, first_line)


def test_every_compactible_log_fixture_is_version_1(spark_resources, compactible_log_file):
    data = (spark_resources / compactible_log_file).read_bytes()
    assert parse_log_file(data, source=compactible_log_file, max_version=1).version == 1


@pytest.mark.parametrize(
    ("data", "lines"),
    [
        (b"v1", ()),
        (b"v1\n", ()),
        (b"v1\na", ("a",)),
        (b"v1\na\n", ("a",)),
        (b"v1\na\n\n", ("a", "")),
        (b"v1\r\n{}\r\nx", ("{}", "x")),
        (b"v1\n\n-", ("", "-")),
    ],
)
def test_lines_are_split_like_scala_get_lines(data, lines):
    assert parse_log_file(data, source="offsets/0", max_version=1).lines == lines


def test_version_line_may_carry_surrounding_spaces_like_commit_log_trims_it():
    assert parse_log_file(b" v2 \n{}", source="commits/0", max_version=3).version == 2


def test_empty_file_is_an_incomplete_log_file():
    with pytest.raises(IncompleteLogFileError, match=r"^offsets/7: Incomplete log file"):
        parse_log_file(b"", source="offsets/7", max_version=1)


@pytest.mark.parametrize(
    "header",
    [b"", b"v", b"v0", b"v-1", b"v+1", b"V1", b"1", b"v1x", b"v 1", b"v2147483648", b"{", b"v\xd9\xa3"],
)
def test_malformed_version_line_is_corrupt_like_metadata_version_util(header):
    with pytest.raises(CorruptFileError) as raised:
        parse_log_file(header + b"\n{}", source="commits/41", max_version=3)
    assert str(raised.value).startswith("commits/41: Log file was malformed: failed to read correct log version")
    assert raised.value.offset == 0


def test_version_above_the_maximum_is_unsupported():
    with pytest.raises(UnsupportedVersionError) as raised:
        parse_log_file(b"v3\n{}", source="offsets/25", max_version=2)
    assert str(raised.value) == "offsets/25: log version v3 is newer than the supported v2"
    assert (raised.value.found, raised.value.supported) == (3, 2)


def test_largest_java_int_version_is_unsupported_not_malformed():
    with pytest.raises(UnsupportedVersionError):
        parse_log_file(b"v2147483647", source="offsets/25", max_version=2)


def test_invalid_utf8_is_reported_at_its_byte_offset():
    with pytest.raises(CorruptFileError) as raised:
        parse_log_file(b"v1\nab\xffc", source="sources/0/3", max_version=1)
    assert str(raised.value) == "sources/0/3: not UTF-8 text (at byte 5)"


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a":-Infinity}', "1" * 101, "[" * 100_000, "{", ""])
def test_json_that_spark_never_writes_is_corrupt(text):
    with pytest.raises(CorruptFileError, match=r"^offsets/1: line 2: invalid JSON"):
        parse_json_value(text, JsonSite("offsets/1", "line 2"))


def test_json_error_offset_counts_bytes_not_characters():
    with pytest.raises(CorruptFileError) as raised:
        parse_json_value('{"é":}', JsonSite("offsets/1", "line 2", offset=3))
    # '{"é":' is 6 bytes in UTF-8 (é takes two), so the bad '}' is at 3 + 6.
    assert raised.value.offset == 9


def test_json_object_is_required_where_spark_reads_a_case_class():
    with pytest.raises(CorruptFileError, match=r"^commits/0: line 2: expected a JSON object, found \[1, 2\]"):
        parse_json_object("[1, 2]", JsonSite("commits/0", "line 2"))
