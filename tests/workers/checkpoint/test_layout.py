from __future__ import annotations

import pytest

from workers.checkpoint.layout import is_temporary_file, parse_batch_id


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("0", 0),
        ("7", 7),
        ("25", 25),
        ("9223372036854775807", 9223372036854775807),  # Long.MAX_VALUE
        ("9223372036854775808", None),  # does not fit a Java long
        ("007", None),  # Spark never pads
        ("+7", None),
        ("-1", None),
        ("", None),
        ("1.5", None),
        (".0.crc", None),
        ("0.crc", None),
        (".0.3b2c5a1e-8f1d-4d7e-9c1a-2b3c4d5e6f70.tmp", None),
        ("7.compact", None),  # only compactible logs have compaction files
        ("metadata", None),
        ("٣", None),  # a non-ASCII digit is no Java long
        ("7\n", None),
    ],
)
def test_parse_batch_id_accepts_only_spark_batch_file_names(name, expected):
    assert parse_batch_id(name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("9.compact", 9),
        ("19.compact", 19),
        ("10", 10),
        (".9.compact.crc", None),
        ("x.compact", None),
        (".compact", None),
    ],
)
def test_parse_batch_id_accepts_compact_files_in_compactible_logs(name, expected):
    assert parse_batch_id(name, compactible=True) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (".25.3b2c5a1e-8f1d-4d7e-9c1a-2b3c4d5e6f70.tmp", True),
        (".4.delta.3b2c5a1e-8f1d-4d7e-9c1a-2b3c4d5e6f70.TID12.tmp", True),
        (".metadata.3B2C5A1E-8F1D-4D7E-9C1A-2B3C4D5E6F70.tmp", True),
        ("25", False),
        (".25.crc", False),
        ("25.tmp", False),
        (".25.not-a-uuid.tmp", False),
        ("25.3b2c5a1e-8f1d-4d7e-9c1a-2b3c4d5e6f70.tmp", False),  # no leading dot
    ],
)
def test_is_temporary_file_recognises_leftovers_of_atomic_writes(name, expected):
    assert is_temporary_file(name) is expected
