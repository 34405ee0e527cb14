"""lz4-java's LZ4Block stream: the default compression of HDFS state store files.

Spark's LZ4CompressionCodec wraps every state file (``N.delta``, ``N.snapshot``) in an
``LZ4BlockOutputStream`` (lz4-java). The stream is a sequence of blocks, each a 21-byte header
followed by its payload; all header integers are little-endian:

    offset  size  field
    0       8     magic ``LZ4Block``
    8       1     token = method | level; method 0x10 RAW (stored), 0x20 LZ4; the block holds
                  at most 2**(10 + level) decompressed bytes (32 KiB, Spark's default -> level 5)
    9       4     compressed length (length of the payload)
    13      4     decompressed length
    17      4     XXH32(decompressed bytes, seed 0x9747B28C) & 0x0FFFFFFF
    21      n     payload: a raw LZ4 block (no frame, no size prefix) or the stored bytes

``close()`` writes an end mark: a RAW block with both lengths and the checksum 0. Spark reads
with ``stopOnEmptyBlock=false``, so an end mark does not stop the reader: concatenated streams
are one stream, and the stream ends where the file ends.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import lz4.block
import xxhash

from .errors import CorruptFileError, TruncatedFileError

MAGIC = b"LZ4Block"
HEADER = struct.Struct("<8sBiii")
METHOD_RAW = 0x10
METHOD_LZ4 = 0x20
LEVEL_BASE = 10
XXH32_SEED = 0x9747B28C
CHECKSUM_MASK = 0x0FFFFFFF
# spark.io.compression.lz4.blockSize defaults to 32k.
DEFAULT_BLOCK_SIZE = 32768
MIN_BLOCK_SIZE = 64
MAX_BLOCK_SIZE = 1 << 25


def decompress_lz4_block_stream(data: bytes, *, source: str, max_bytes: int | None = None) -> bytes:
    """Return the decompressed content of an LZ4Block stream.

    Every check of lz4-java's LZ4BlockInputStream is made, and more: a stream that ends inside
    a block header is reported as truncated (lz4-java 1.11.0 would stop silently there).
    Raises CorruptFileError (with the byte offset of the block) or TruncatedFileError; with
    ``max_bytes``, CorruptFileError once the output would grow past it.
    """
    return b"".join(iter_lz4_blocks(data, source=source, max_bytes=max_bytes))


def iter_lz4_blocks(data: bytes, *, source: str, max_bytes: int | None = None) -> Iterator[bytes]:
    """Yield the decompressed payload of every non-empty block, in order."""
    view = memoryview(data)
    pos, produced = 0, 0
    while pos < len(data):
        header = _read_header(data, pos, source)
        _, compressed_len, raw_len, _ = header
        if raw_len == 0:
            pos += HEADER.size
            continue
        if max_bytes is not None and produced + raw_len > max_bytes:
            raise CorruptFileError(source, f"decompressed content exceeds the limit of {max_bytes} bytes", offset=pos)
        raw = _block_content(view, pos, header, source)
        produced += raw_len
        pos += HEADER.size + compressed_len
        yield raw


def _block_content(view: memoryview, pos: int, header: tuple[int, int, int, int], source: str) -> bytes:
    """The content of the block at ``pos`` whose ``header`` is read, its checksum checked."""
    method, compressed_len, raw_len, check = header
    payload_at = pos + HEADER.size
    if payload_at + compressed_len > len(view):
        raise TruncatedFileError(
            source,
            f"LZ4 block announces {compressed_len} payload bytes, only {len(view) - payload_at} remain",
            offset=payload_at,
        )
    payload = view[payload_at : payload_at + compressed_len]
    raw = bytes(payload) if method == METHOD_RAW else _decompress(payload, raw_len, source, payload_at)
    if xxhash.xxh32_intdigest(raw, seed=XXH32_SEED) & CHECKSUM_MASK != check:
        raise CorruptFileError(source, "LZ4 block checksum mismatch", offset=pos)
    return raw


def _read_header(data: bytes, pos: int, source: str) -> tuple[int, int, int, int]:
    """Unpack and check the block header at ``pos``; return method, lengths and checksum."""
    if len(data) - pos < HEADER.size:
        raise TruncatedFileError(
            source, f"the file ends inside an LZ4 block header ({len(data) - pos} of 21 bytes)", offset=pos
        )
    magic, token, compressed_len, raw_len, check = HEADER.unpack_from(data, pos)
    if magic != MAGIC:
        raise CorruptFileError(source, f"bad LZ4 block magic {magic!r}", offset=pos)
    method, level = token & 0xF0, token & 0x0F
    if method not in (METHOD_RAW, METHOD_LZ4):
        raise CorruptFileError(source, f"unknown LZ4 block method {method:#04x}", offset=pos + 8)
    problem = _length_problem(method, level, compressed_len, raw_len, check)
    if problem:
        raise CorruptFileError(source, f"bad LZ4 block header: {problem}", offset=pos)
    return method, compressed_len, raw_len, check & CHECKSUM_MASK if raw_len else 0


def _length_problem(method: int, level: int, compressed_len: int, raw_len: int, check: int) -> str:
    """Name the first length rule of LZ4BlockInputStream.refill the header breaks, or ''."""
    if raw_len > 1 << (LEVEL_BASE + level):
        return f"decompressed length {raw_len} exceeds the level's block size {1 << (LEVEL_BASE + level)}"
    if raw_len < 0 or compressed_len < 0:
        return f"negative length (compressed {compressed_len}, decompressed {raw_len})"
    if (raw_len == 0) != (compressed_len == 0):
        return f"only one length is zero (compressed {compressed_len}, decompressed {raw_len})"
    if method == METHOD_RAW and raw_len != compressed_len:
        return f"stored block with different lengths (compressed {compressed_len}, decompressed {raw_len})"
    if raw_len == 0 and check != 0:
        return f"end mark with a non-zero checksum {check:#x}"
    return ""


def _decompress(payload: memoryview, raw_len: int, source: str, offset: int) -> bytes:
    try:
        return lz4.block.decompress(payload, uncompressed_size=raw_len)
    except lz4.block.LZ4BlockError as exc:
        raise CorruptFileError(source, f"invalid LZ4 block payload: {exc}", offset=offset) from None


def compress_lz4_block_stream(raw: bytes, *, block_size: int = DEFAULT_BLOCK_SIZE) -> bytes:
    """Return ``raw`` as an LZ4Block stream that Spark's LZ4CompressionCodec reads.

    Like LZ4BlockOutputStream: chunks of ``block_size`` bytes (64 bytes to 32 MiB), each stored
    RAW when LZ4 does not make it smaller, then the end mark.
    """
    level = _level_for(block_size)
    view = memoryview(raw)
    blocks = [_block(view[start : start + block_size], level) for start in range(0, len(raw), block_size)]
    blocks.append(HEADER.pack(MAGIC, METHOD_RAW | level, 0, 0, 0))
    return b"".join(blocks)


def _level_for(block_size: int) -> int:
    """Return the token level of a block size, as LZ4BlockOutputStream.compressionLevel does."""
    if not MIN_BLOCK_SIZE <= block_size <= MAX_BLOCK_SIZE:
        raise ValueError(f"block_size must be from 64 to 2**25 bytes, not {block_size}")
    # ceil(log2(block_size)) - 10, so that 2**(10 + level) >= block_size.
    return max(0, (block_size - 1).bit_length() - LEVEL_BASE)


def _block(chunk: memoryview, level: int) -> bytes:
    compressed = lz4.block.compress(chunk, store_size=False)
    check = xxhash.xxh32_intdigest(chunk, seed=XXH32_SEED) & CHECKSUM_MASK
    if len(compressed) >= len(chunk):
        method, payload = METHOD_RAW, bytes(chunk)
    else:
        method, payload = METHOD_LZ4, compressed
    return HEADER.pack(MAGIC, method | level, len(payload), len(chunk), check) + payload
