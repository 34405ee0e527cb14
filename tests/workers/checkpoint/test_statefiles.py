"""Records of Spark-written N.delta / N.snapshot files (lz4 and zstd, with and without row checksums)."""

from __future__ import annotations

import struct

import pytest

from fixture_paths import OUR_FIXTURES
from state_corpus import case_id, state_file_cases
from workers.checkpoint.errors import CorruptFileError, TruncatedFileError, UnsupportedCodecError
from workers.checkpoint.statefiles import StateRecord, iter_state_records, parse_state_file

CASES = state_file_cases()
ZSTD_CHECKSUM = OUR_FIXTURES / "hdfs_zstd_row_checksum" / "checkpoint" / "state" / "0" / "0"


def _records(case):
    return parse_state_file(
        case.path.read_bytes(),
        source=case.source,
        codec=case.codec,
        row_checksum=case.row_checksum,
        removals_allowed=not case.is_snapshot,
    )


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_fixture_state_file_parses_into_unsafe_rows_of_whole_words(case):
    for record in _records(case):
        # UnsafeRow sizes are multiples of 8; a leftover checksum prefix would break that.
        assert len(record.key) % 8 == 0 and len(record.key) >= 8
        assert record.value is None or len(record.value) % 8 == 0


def test_snapshots_hold_only_puts_and_some_deltas_hold_removals():
    snapshots = [r for case in CASES if case.is_snapshot for r in _records(case)]
    deltas = [r for case in CASES if not case.is_snapshot for r in _records(case)]
    assert snapshots and not any(r.is_removal for r in snapshots)
    assert any(r.is_removal for r in deltas)


def test_row_checksum_prefix_is_stripped_from_values_of_a_zstd_snapshot():
    # windowed count: key = (window struct, key string) row of 56 bytes, value = (count) row of
    # 16 bytes; Spark 4.3 wrote 20-byte values (4-byte checksum first).
    data = (ZSTD_CHECKSUM / "12.snapshot").read_bytes()
    assert data[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame
    records = parse_state_file(data, source="12.snapshot", codec="zstd", row_checksum=True, removals_allowed=False)
    assert records and {(len(r.key), len(r.value)) for r in records} == {(56, 16)}


def _content(*records: tuple[bytes, bytes | None], end: bool = True) -> bytes:
    parts = []
    for key, value in records:
        parts.append(struct.pack(">i", len(key)) + key)
        parts.append(struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value)
    return b"".join(parts) + (struct.pack(">i", -1) if end else b"")


def test_removal_keys_lose_their_checksum_and_put_keys_keep_all_bytes():
    raw = _content((b"K" * 8, b"CCCC" + b"V" * 8), (b"cccc" + b"K" * 8, None))
    assert list(iter_state_records(raw, source="d", row_checksum=True)) == [
        StateRecord(b"K" * 8, b"V" * 8),
        StateRecord(b"K" * 8, None),
    ]


def test_pre_2_3_values_are_floored_to_whole_words():
    raw = _content((b"K" * 8, b"V" * 12))
    assert list(iter_state_records(raw, source="d")) == [StateRecord(b"K" * 8, b"V" * 8)]


@pytest.mark.parametrize(
    ("raw", "error", "reason", "offset"),
    [
        (_content((b"K" * 8, b"V" * 8), end=False), TruncatedFileError, "without the -1 end marker", 24),
        (struct.pack(">i", -2), CorruptFileError, "negative key size -2", 0),
        (struct.pack(">i", 2**31 - 1) + b"x", TruncatedFileError, "announces 2147483647 bytes", 0),
        (_content((b"K" * 8, b"V" * 8))[:14], TruncatedFileError, "inside a record's value size", 12),
    ],
    ids=["no end marker", "negative key size", "huge key size", "cut in value size"],
)
def test_damaged_record_framing_gives_typed_errors_with_offsets(raw, error, reason, offset):
    with pytest.raises(error) as raised:
        list(iter_state_records(raw, source="state/0/0/2.delta"))
    assert type(raised.value) is error and reason in str(raised.value)
    assert str(raised.value).startswith("state/0/0/2.delta: ") and raised.value.offset == offset


def test_a_removal_in_a_snapshot_is_corrupt():
    with pytest.raises(CorruptFileError, match="negative value size -1 in a snapshot"):
        list(iter_state_records(_content((b"K" * 8, None)), source="3.snapshot", removals_allowed=False))


@pytest.mark.parametrize("codec", ["snappy", "lzf", "com.example.MyCodec"])
def test_codecs_ckptweb_cannot_read_are_named_in_the_error(codec):
    with pytest.raises(UnsupportedCodecError, match=f"'{codec}'.*not supported by ckptweb"):
        parse_state_file(b"", source="1.delta", codec=codec)


@pytest.mark.parametrize("codec", ["LZ4", "org.apache.spark.io.LZ4CompressionCodec", None])
def test_spark_spellings_of_lz4_are_read_as_lz4(codec):
    from workers.checkpoint.lz4block import compress_lz4_block_stream

    data = compress_lz4_block_stream(_content((b"K" * 8, b"V" * 8)))
    assert parse_state_file(data, source="1.delta", codec=codec) == [StateRecord(b"K" * 8, b"V" * 8)]
