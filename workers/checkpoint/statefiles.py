"""Records of HDFSBackedStateStoreProvider state files (``N.delta``, ``N.snapshot``).

Inside the compression stream (statecodec.py) a file is a Java DataOutputStream of records;
integers are big-endian int32:

    put      key size, key bytes (UnsafeRow), value size, value bytes (UnsafeRow)
    removal  key size, key bytes, a negative value size (Spark writes -1)   -- deltas only
    end      -1 in the key-size position; any other negative key size is an error

A snapshot holds puts only. The reader (HDFSBackedStateStoreProvider.updateFromDeltaFile /
readSnapshotFile) floors a value's length to a multiple of 8, because Spark before 2.3 wrote
4 stray bytes after some value rows; ``StateRecord.value`` is that floored row.

With ``spark.sql.streaming.stateStore.rowChecksum.enabled`` (Spark 4.1+, persisted in the offset
log's conf) a put's value and a removal's key start with a 4-byte checksum
(KeyValueChecksumEncoder); a put's key carries none. The records here never include it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from .errors import CorruptFileError, TruncatedFileError
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file

SIZE = struct.Struct(">i")
END_OF_FILE = -1
CHECKSUM_PREFIX_BYTES = 4


@dataclass(frozen=True, slots=True)
class StateRecord:
    """One record of a state file: a put, or a removal when ``value`` is None."""

    key: bytes
    value: bytes | None

    @property
    def is_removal(self) -> bool:
        return self.value is None


def parse_state_file(
    data: bytes,
    *,
    source: str,
    codec: str | None = "lz4",
    row_checksum: bool = False,
    removals_allowed: bool = True,
    max_bytes: int = MAX_STATE_FILE_BYTES,
) -> list[StateRecord]:
    """Decompress a state file and return its records in file order."""
    raw = decompress_state_file(data, source=source, codec=codec, max_bytes=max_bytes)
    return list(iter_state_records(raw, source=source, row_checksum=row_checksum, removals_allowed=removals_allowed))


def iter_state_records(
    raw: bytes, *, source: str, row_checksum: bool = False, removals_allowed: bool = True
) -> Iterator[StateRecord]:
    """Yield the records of a decompressed state file up to its end marker.

    ``removals_allowed=False`` reads a snapshot. Offsets in errors are positions in the
    decompressed content. Raises TruncatedFileError when the content ends before the end marker
    or inside a record, CorruptFileError for a negative size Spark rejects.
    """
    pos = 0
    while True:
        key_size = read_size(raw, pos, source, "key size")
        if key_size == END_OF_FILE:
            return
        if key_size < 0:
            raise CorruptFileError(source, f"negative key size {key_size} in the decompressed content", offset=pos)
        key = take(raw, pos + 4, key_size, source, "key")
        pos += 4 + key_size
        value_size = read_size(raw, pos, source, "value size")
        if value_size < 0:
            check_removal(removals_allowed, value_size, source, pos)
            yield StateRecord(strip_checksum(key, source, pos) if row_checksum else key, None)
            pos += 4
            continue
        value = take(raw, pos + 4, value_size, source, "value")
        if row_checksum:
            value = strip_checksum(value, source, pos)
        yield StateRecord(key, value[: len(value) & ~7])
        pos += 4 + value_size


def read_size(raw: bytes, pos: int, source: str, what: str) -> int:
    """Return the big-endian int32 at ``pos``; a missing one is a TruncatedFileError."""
    if pos + 4 > len(raw):
        if pos == len(raw) and what == "key size":
            raise TruncatedFileError(source, "the content ends without the -1 end marker", offset=pos)
        raise TruncatedFileError(source, f"the content ends inside a record's {what}", offset=pos)
    return SIZE.unpack_from(raw, pos)[0]


def take(raw: bytes, pos: int, size: int, source: str, what: str) -> bytes:
    """Return ``size`` bytes at ``pos``, checking first that they are there."""
    if pos + size > len(raw):
        raise TruncatedFileError(
            source, f"a record's {what} announces {size} bytes, only {len(raw) - pos} remain", offset=pos - 4
        )
    return raw[pos : pos + size]


def check_removal(removals_allowed: bool, value_size: int, source: str, pos: int) -> None:
    """Refuse a removal in a snapshot, as readSnapshotFile does."""
    if not removals_allowed:
        raise CorruptFileError(source, f"negative value size {value_size} in a snapshot", offset=pos)


def strip_checksum(row: bytes, source: str, pos: int) -> bytes:
    """Drop the 4-byte row checksum KeyValueChecksumEncoder puts before a row."""
    if len(row) < CHECKSUM_PREFIX_BYTES:
        raise CorruptFileError(
            source, f"a {len(row)}-byte row is too short for its row checksum", offset=pos
        )
    return row[CHECKSUM_PREFIX_BYTES:]
