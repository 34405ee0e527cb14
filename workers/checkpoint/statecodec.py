"""The compression codecs of HDFS state store files, by the name Spark persists for them.

The codec is ``spark.sql.streaming.stateStore.compression.codec`` from the offset log's conf
(since Spark 3.1; absent means ``lz4``, the default before and after). Spark resolves it with
``CompressionCodec.createCodec``: a short name, case-insensitive (``lz4``, ``lzf``, ``snappy``,
``zstd``), or a class name. ckptweb reads lz4 (lz4-java LZ4Block, lz4block.py) and zstd
(standard zstd frames written by zstd-jni, possibly several); the others raise
UnsupportedCodecError.
"""

from __future__ import annotations

import zstandard

from .errors import CorruptFileError, TruncatedFileError, UnsupportedCodecError
from .lz4block import decompress_lz4_block_stream

DEFAULT_CODEC = "lz4"
# A state file's content is the partition's rows; the bound only stops a zip bomb (a few KiB
# that claim gigabytes) from exhausting a worker's memory.
MAX_STATE_FILE_BYTES = 1 << 30

# CompressionCodec.shortCompressionCodecNames: Spark accepts the class name as well.
_CODEC_CLASSES = {
    "org.apache.spark.io.lz4compressioncodec": "lz4",
    "org.apache.spark.io.zstdcompressioncodec": "zstd",
}
# A zstd RLE block turns 4 input bytes into up to 128 KiB; feeding at most budget / 2**15
# bytes at a time keeps one step's output within the remaining budget.
_ZSTD_MAX_RATIO = 1 << 15
_ZSTD_MIN_CHUNK = 1024
_ZSTD_MAX_CHUNK = 1 << 20


def normalize_codec_name(codec: str | None) -> str:
    """Return "lz4", "zstd" or the lower-cased name Spark would look up (None -> lz4)."""
    if codec is None:
        return DEFAULT_CODEC
    name = codec.strip().lower()
    return _CODEC_CLASSES.get(name, name)


def decompress_state_file(
    data: bytes, *, source: str, codec: str | None, max_bytes: int = MAX_STATE_FILE_BYTES
) -> bytes:
    """Return the decompressed content of a state file written with ``codec``.

    Raises UnsupportedCodecError for codecs ckptweb cannot read, CorruptFileError or
    TruncatedFileError for damaged data, and CorruptFileError when the content would exceed
    ``max_bytes``.
    """
    name = normalize_codec_name(codec)
    if name == "lz4":
        return decompress_lz4_block_stream(data, source=source, max_bytes=max_bytes)
    if name == "zstd":
        return decompress_zstd_frames(data, source=source, max_bytes=max_bytes)
    raise UnsupportedCodecError(source, codec=codec or "")


def decompress_zstd_frames(data: bytes, *, source: str, max_bytes: int = MAX_STATE_FILE_BYTES) -> bytes:
    """Return the concatenated content of the zstd frames that make up ``data``.

    Like zstd-jni's ZstdInputStream (continuous across frames), but a frame cut short is
    TruncatedFileError rather than a silent end.
    """
    parts: list[bytes] = []
    produced, pos, is_inside_frame = 0, 0, False
    decoder = zstandard.ZstdDecompressor().decompressobj()
    while pos < len(data):
        step = min(max((max_bytes - produced) // _ZSTD_MAX_RATIO, _ZSTD_MIN_CHUNK), _ZSTD_MAX_CHUNK)
        decoder, output, is_inside_frame = _feed_zstd(decoder, data[pos : pos + step], source, pos)
        produced += len(output)
        if produced > max_bytes:
            raise CorruptFileError(source, f"decompressed content exceeds the limit of {max_bytes} bytes", offset=pos)
        parts.append(output)
        pos += step
    if is_inside_frame:
        raise TruncatedFileError(source, "the file ends inside a zstd frame", offset=len(data))
    return b"".join(parts)


def _feed_zstd(decoder, chunk: bytes, source: str, offset: int):
    """Feed one chunk, starting a new decoder at each frame boundary.

    Return the decoder to feed next, the output, and whether the chunk ended inside a frame.
    """
    outputs = []
    try:
        while chunk:
            outputs.append(decoder.decompress(chunk))
            if not decoder.eof:
                return decoder, b"".join(outputs), True
            chunk = decoder.unused_data
            decoder = zstandard.ZstdDecompressor().decompressobj()
    except zstandard.ZstdError as exc:
        raise CorruptFileError(source, f"invalid zstd data in the bytes from here: {exc}", offset=offset) from None
    return decoder, b"".join(outputs), False
