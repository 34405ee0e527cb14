"""lz4-java LZ4Block streams: Spark-written state files decode, our writer's output decodes, and
every header rule of LZ4BlockInputStream is enforced with the block's byte offset."""

from __future__ import annotations

import struct

import lz4.block
import pytest
import xxhash

from state_corpus import case_id, state_file_cases
from workers.checkpoint.errors import CorruptFileError, TruncatedFileError
from workers.checkpoint.lz4block import compress_lz4_block_stream, decompress_lz4_block_stream

LZ4_CASES = [case for case in state_file_cases() if case.codec == "lz4"]
HEADER = struct.Struct("<8sBiii")
END_MARK_32K = b"LZ4Block\x15" + bytes(12)


@pytest.mark.parametrize("case", LZ4_CASES, ids=case_id)
def test_every_spark_written_state_file_decodes_to_records_ending_with_the_end_marker(case):
    raw = decompress_lz4_block_stream(case.path.read_bytes(), source=case.source)
    assert raw.endswith(b"\xff\xff\xff\xff")


@pytest.mark.parametrize("case", LZ4_CASES, ids=case_id)
def test_every_spark_written_state_file_ends_with_a_32k_end_mark(case):
    # Spark's LZ4CompressionCodec: 32 KiB blocks (level 5), end mark = RAW token 0x15, zeros.
    assert case.path.read_bytes().endswith(END_MARK_32K)


def test_an_empty_delta_is_one_stored_block_with_the_end_marker():
    # 2.1.0 state/0/0/1.delta is 46 bytes: a RAW block of ff ff ff ff, then the end mark.
    from fixture_paths import SPARK_TEST_RESOURCES

    data = (SPARK_TEST_RESOURCES / "checkpoint-version-2.1.0/state/0/0/1.delta").read_bytes()
    assert data[:9] == b"LZ4Block\x15" and data[9:17] == struct.pack("<ii", 4, 4)
    assert decompress_lz4_block_stream(data, source="1.delta") == b"\xff\xff\xff\xff"


@pytest.mark.parametrize("size", [0, 1, 63, 32768, 32769, 100_000])
def test_what_we_compress_decompresses_to_the_same_bytes(size):
    raw = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    assert decompress_lz4_block_stream(compress_lz4_block_stream(raw), source="x") == raw


def test_the_writer_stores_incompressible_chunks_raw_and_compressible_ones_as_lz4():
    incompressible = bytes((i * 7919) % 251 for i in range(64))
    stream = compress_lz4_block_stream(b"a" * 64 + incompressible, block_size=64)
    first, second = HEADER.unpack_from(stream, 0), None
    second_at = 21 + first[2]
    second = HEADER.unpack_from(stream, second_at)
    assert first[1] == 0x20 and first[3] == 64  # LZ4, level 0
    assert second[1] == 0x10 and second[2] == second[3] == 64  # RAW
    assert second[4] == xxhash.xxh32_intdigest(incompressible, seed=0x9747B28C) & 0x0FFFFFFF
    assert stream.endswith(b"LZ4Block\x10" + bytes(12))


@pytest.mark.parametrize("block_size", [63, 2**25 + 1])
def test_a_block_size_outside_lz4_javas_range_is_refused(block_size):
    with pytest.raises(ValueError, match="block_size"):
        compress_lz4_block_stream(b"x", block_size=block_size)


def _block(token=0x25, compressed=None, raw=b"abc" * 10, check=None, payload=None, magic=b"LZ4Block"):
    payload = lz4.block.compress(raw, store_size=False) if payload is None else payload
    compressed = len(payload) if compressed is None else compressed
    check = xxhash.xxh32_intdigest(raw, seed=0x9747B28C) & 0x0FFFFFFF if check is None else check
    return HEADER.pack(magic, token, compressed, len(raw), check) + payload


GOOD = _block()
DAMAGED = {
    "bad magic": (b"X" * 21 + GOOD[21:], "bad LZ4 block magic", CorruptFileError),
    "unknown method": (_block(token=0x35), "unknown LZ4 block method", CorruptFileError),
    "longer than the level allows": (_block(token=0x20, raw=b"a" * 2000), "exceeds the level", CorruptFileError),
    "negative compressed length": (_block(compressed=-5), "negative length", CorruptFileError),
    "raw with different lengths": (_block(token=0x15, payload=b"abc"), "stored block", CorruptFileError),
    "checksum mismatch": (_block(check=1), "checksum mismatch", CorruptFileError),
    "invalid payload": (_block(payload=b"\xff" * 12), "invalid LZ4 block payload", CorruptFileError),
    "end mark with a checksum": (HEADER.pack(b"LZ4Block", 0x15, 0, 0, 7), "end mark", CorruptFileError),
    "payload cut short": (GOOD[:-3], "payload bytes", TruncatedFileError),
    "header cut short": (GOOD + GOOD[:10], "inside an LZ4 block header", TruncatedFileError),
    "huge declared length": (HEADER.pack(b"LZ4Block", 0x2F, 2**31 - 1, 2**25, 0), "payload bytes", TruncatedFileError),
}


@pytest.mark.parametrize("name", DAMAGED)
def test_each_lz4_java_header_rule_gives_a_typed_error_naming_file_and_offset(name):
    data, reason, error = DAMAGED[name]
    with pytest.raises(error) as raised:
        decompress_lz4_block_stream(GOOD + data, source="state/0/0/3.delta")
    assert type(raised.value) is error
    assert str(raised.value).startswith("state/0/0/3.delta: ") and reason in str(raised.value)
    assert raised.value.offset >= len(GOOD)


def test_output_beyond_max_bytes_is_refused_before_it_is_decompressed():
    stream = compress_lz4_block_stream(bytes(200_000))
    with pytest.raises(CorruptFileError, match="exceeds the limit of 100000 bytes"):
        decompress_lz4_block_stream(stream, source="5.snapshot", max_bytes=100_000)


def test_concatenated_streams_read_as_one_as_with_stop_on_empty_block_false():
    stream = compress_lz4_block_stream(b"abc") + compress_lz4_block_stream(b"def")
    assert decompress_lz4_block_stream(stream, source="x") == b"abcdef"
