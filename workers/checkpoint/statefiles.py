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

Besides the record reader, faster ways through the same framing, with the same checks on every
record they accept: find_record_run finds a run of records with equal sizes (fixed-width
rows) by comparing strided columns of size bytes, and iter_run_keys cuts its keys with struct;
match_value_run and cut_value_run_keys read stretches whose key sizes keep changing (string
keys) but whose value size does not (or which are all removals) with regular expressions built
for the key sizes seen so far; scan_records reads stretches where value sizes change too
straight into a dict.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain
from operator import eq

from .errors import CorruptFileError, TruncatedFileError
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file

SIZE = struct.Struct(">i")
END_OF_FILE = -1
CHECKSUM_PREFIX_BYTES = 4
# A run's first probe looks this many records ahead, then four times as far each time it holds,
# up to MAX_PROBE_BYTES of records: the slicing wasted where a run ends stays small.
FIRST_PROBE_RECORDS = 16
MAX_PROBE_BYTES = 1 << 18
# Keys unpacked per struct call: one tuple per 64 keys instead of one per key.
KEYS_PER_UNPACK = 64


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
    raw: bytes, *, source: str, row_checksum: bool = False, removals_allowed: bool = True, floor_values: bool = True
) -> Iterator[StateRecord]:
    """Yield the records of a decompressed state file up to its end marker.

    ``removals_allowed=False`` reads a snapshot. ``floor_values=False`` keeps values whole: the
    HDFS provider's reader floors them to 8-byte words, RocksDB changelogs (same framing, values
    of 1 + 8k bytes) must not be. Offsets in errors are positions in the decompressed content.
    Raises TruncatedFileError when the content ends before the end marker or inside a record,
    CorruptFileError for a negative size Spark rejects.
    """
    keep = ~7 if floor_values else -1
    skip = CHECKSUM_PREFIX_BYTES if row_checksum else 0
    pos = 0
    while (sizes := read_record_sizes(raw, pos, source, row_checksum, removals_allowed)) is not None:
        key_size, value_size = sizes
        key_at = pos + 4
        if value_size < 0:
            yield StateRecord(raw[key_at + skip : key_at + key_size], None)
            pos = key_at + key_size + 4
            continue
        value_at = key_at + key_size + 4 + skip
        value_end = key_at + key_size + 4 + value_size
        # readSnapshotFile/updateFromDeltaFile floor the value to whole 8-byte words.
        yield StateRecord(raw[key_at : key_at + key_size], raw[value_at : value_at + ((value_end - value_at) & keep)])
        pos = value_end


def read_record_sizes(
    raw: bytes, pos: int, source: str, row_checksum: bool, removals_allowed: bool
) -> tuple[int, int] | None:
    """Check the record at ``pos`` and return its key and value sizes, or None at the end marker.

    A negative value size is a removal. Every rule the record readers apply is checked here,
    before any byte of the record is copied.
    """
    key_size = read_size(raw, pos, source, "key size")
    if key_size == END_OF_FILE:
        return None
    if key_size < 0:
        raise CorruptFileError(source, f"negative key size {key_size} in the decompressed content", offset=pos)
    key_at = pos + 4
    _check_available(raw, key_at, key_size, source, "key")
    value_size_at = key_at + key_size
    value_size = read_size(raw, value_size_at, source, "value size")
    if value_size < 0:
        check_removal(removals_allowed, value_size, source, value_size_at)
        row_size = key_size
    else:
        _check_available(raw, value_size_at + 4, value_size, source, "value")
        row_size = value_size
    if row_checksum and row_size < CHECKSUM_PREFIX_BYTES:
        raise _short_row_error(row_size, source, value_size_at)
    return key_size, value_size


@dataclass(frozen=True, slots=True)
class RecordRun:
    """``count`` consecutive records from byte ``start`` with the same key and value sizes.

    A negative ``value_size`` makes every record of the run a removal.
    """

    start: int
    count: int
    key_size: int
    value_size: int

    @property
    def is_removal(self) -> bool:
        return self.value_size < 0

    @property
    def stride(self) -> int:
        return record_stride(self.key_size, self.value_size)

    @property
    def end(self) -> int:
        return self.start + self.count * self.stride

    def key_row_size(self, row_checksum: bool = False) -> int:
        """The key row each record gives: a removal's key loses its checksum."""
        return self.key_size - (CHECKSUM_PREFIX_BYTES if row_checksum and self.is_removal else 0)

    def value_row_size(self, row_checksum: bool = False) -> int:
        """The value row each put of the run gives: without the checksum, floored to 8 bytes."""
        return (self.value_size - (CHECKSUM_PREFIX_BYTES if row_checksum else 0)) & ~7


def find_record_run(
    raw: bytes, pos: int, *, source: str, row_checksum: bool = False, removals_allowed: bool = True
) -> RecordRun | None:
    """Return the maximal run of records of equal sizes that starts at ``pos``, or None at the end marker.

    The record at ``pos`` gets every check of iter_state_records (and raises its errors at the
    same offsets); the following ones only need their 8 size bytes to equal its own, which is
    checked a column at a time with strided slices: a run of fixed-width rows costs a few
    C-level passes over the content.
    """
    sizes = read_record_sizes(raw, pos, source, row_checksum, removals_allowed)
    if sizes is None:
        return None
    key_size, value_size = sizes
    return RecordRun(
        pos, _count_uniform_records(raw, pos, record_stride(key_size, value_size), key_size), key_size, value_size
    )


def scan_records(
    raw: bytes,
    pos: int,
    into: dict[bytes, int],
    *,
    row_checksum: bool = False,
    removals_allowed: bool = True,
    forget_removals: bool = False,
    max_bytes: int,
) -> int:
    """Read records one by one from ``pos`` into ``into``, for stretches where sizes keep changing.

    A put sets its key (as iter_state_records cuts it) to the value row's size, a removal to -1
    (or, with ``forget_removals``, deletes it), in file order. Return where the scan stopped:
    after the record that passes ``max_bytes`` from ``pos``, at the end marker, or at anything
    irregular, which it leaves unread: find_record_run then reads that record with every check.
    """
    unpack, end, skip = SIZE.unpack_from, len(raw), CHECKSUM_PREFIX_BYTES if row_checksum else 0
    stop = pos + max_bytes
    try:
        while pos < stop:
            (key_size,) = unpack(raw, pos)
            if key_size < 0:
                break
            value_size_at = pos + 4 + key_size
            (value_size,) = unpack(raw, value_size_at)
            if value_size >= skip and value_size_at + 4 + value_size <= end:
                into[raw[pos + 4 : value_size_at]] = (value_size - skip) & ~7
                pos = value_size_at + 4 + value_size
            elif value_size < 0 and key_size >= skip and removals_allowed:
                key = raw[pos + 4 + skip : value_size_at]
                if forget_removals:
                    into.pop(key, None)
                else:
                    into[key] = -1
                pos = value_size_at + 4
            else:
                break
    except struct.error:
        pass  # a size field past the end: find_record_run reports it
    return pos


def match_value_run(
    raw: bytes, pos: int, endpos: int, key_sizes: frozenset[int], value_size: int, *, row_checksum: bool = False
) -> int:
    """Return where the records from ``pos`` stop having a key size of ``key_sizes`` and ``value_size``.

    A negative ``value_size`` stands for removals (any negative value size, as the readers
    accept). Only whole records that end by ``endpos`` count. Every record accepted passes the
    checks of read_record_sizes for a file where removals are allowed whenever ``value_size`` is
    negative (with ``row_checksum``, the caller has checked ``value_size`` >= 4 for puts; removal
    keys shorter than the checksum are not accepted). The scan is one regular-expression match:
    no bytecode runs per record. What it leaves unread, read_record_sizes reads with every check.
    """
    return _value_run_patterns(key_sizes, value_size, row_checksum)[0].match(raw, pos, endpos).end()


def cut_value_run_keys(
    raw: bytes, start: int, end: int, key_sizes: frozenset[int], value_size: int, *, row_checksum: bool = False
) -> list[bytes]:
    """Return the keys of the records between ``start`` and ``end`` that match_value_run accepted,
    as iter_state_records gives them (a removal's key without its row checksum)."""
    return _value_run_patterns(key_sizes, value_size, row_checksum)[1].findall(raw, start, end)


def count_value_run(
    raw: bytes, start: int, end: int, key_sizes: frozenset[int], value_size: int, *, row_checksum: bool = False
) -> int:
    """Return the number of records between ``start`` and ``end``, which match_value_run accepted."""
    return len(_value_run_patterns(key_sizes, value_size, row_checksum)[2].findall(raw, start, end))


def peek_key_size(raw: bytes, pos: int, endpos: int, value_size: int) -> int | None:
    """Return the key size of the record at ``pos`` if its value size is of ``value_size``'s kind
    (the same size, or both negative); None if not, or if its size fields end past ``endpos``.

    Nothing else is checked: a value run learns key sizes this way, and match_value_run accepts
    the record only if it is whole.
    """
    if pos + 4 > endpos:
        return None
    key_size = SIZE.unpack_from(raw, pos)[0]
    if key_size < 0 or pos + 8 + key_size > endpos:
        return None
    other = SIZE.unpack_from(raw, pos + 4 + key_size)[0]
    return key_size if other == value_size or other < 0 and value_size < 0 else None


@lru_cache(maxsize=256)
def _value_run_patterns(
    key_sizes: frozenset[int], value_size: int, row_checksum: bool
) -> tuple[re.Pattern[bytes], re.Pattern[bytes], re.Pattern[bytes]]:
    """The patterns of match_value_run (a possessive run of records), cut_value_run_keys and
    count_value_run.

    A record is its key size field, one alternative per key size (``.{n}`` takes the key), then
    the value size field and value. The key-cutting pattern captures the key in one group whose
    alternatives look behind to the size field to know the key's length (past a removal key's
    checksum with row checksums).
    """
    skip = CHECKSUM_PREFIX_BYTES if row_checksum and value_size < 0 else 0
    sizes = sorted(size for size in key_sizes if size >= skip)
    fields = [re.escape(SIZE.pack(size)) for size in sizes]
    if value_size < 0:
        value = rb"[\x80-\xff][\x00-\xff]{3}"  # any negative int32: a removal
    else:
        value = re.escape(SIZE.pack(value_size)) + b".{%d}" % value_size
    records = b"|".join(b"%s.{%d}" % (field, size) for field, size in zip(fields, sizes, strict=True))
    keys = b"|".join(
        b"(?<=%s.{%d}).{%d}" % (field, skip, size - skip) for field, size in zip(fields, sizes, strict=True)
    )
    run = re.compile(b"(?s)(?:(?:%s)%s)*+" % (records or b"(?!)", value))
    cut = re.compile(b"(?s)(?:%s).{%d}(%s)%s" % (b"|".join(fields) or b"(?!)", skip, keys or b"(?!)", value))
    # An empty group: findall gives b"" (one shared object) per record, allocating nothing.
    count = re.compile(b"(?s)()(?:%s)%s" % (records or b"(?!)", value))
    return run, cut, count


def record_stride(key_size: int, value_size: int) -> int:
    """The bytes of a record: two size fields, the key, and the value unless it is a removal."""
    return 8 + key_size + max(value_size, 0)


def _count_uniform_records(raw: bytes, start: int, stride: int, key_size: int) -> int:
    """Count the records from ``start`` whose size fields equal those of the (checked) first one.

    Only records that lie wholly inside ``raw`` count. The probe window grows fourfold while
    every record in it matches, so a long run costs O(run) and a short one O(1).
    """
    available = (len(raw) - start) // stride
    if available < 2 or not _has_same_sizes(raw, start, start + stride, key_size):
        return 1
    size_columns = (0, 1, 2, 3, key_size + 4, key_size + 5, key_size + 6, key_size + 7)
    count, window = 2, FIRST_PROBE_RECORDS
    while count < available:
        limit = min(count + window, available)
        count += _count_matching_records(raw, start, stride, count, limit, size_columns)
        if count < limit:
            break
        window = min(window * 4, max(MAX_PROBE_BYTES // stride, FIRST_PROBE_RECORDS))
    return count


def _has_same_sizes(raw: bytes, first: int, other: int, key_size: int) -> bool:
    """Compare two records' size fields: a cheap first test before slicing whole columns."""
    value_size_at = 4 + key_size
    return (
        raw[first : first + 4] == raw[other : other + 4]
        and raw[first + value_size_at : first + value_size_at + 4]
        == raw[other + value_size_at : other + value_size_at + 4]
    )


def _count_matching_records(
    raw: bytes, start: int, stride: int, first: int, limit: int, columns: tuple[int, ...]
) -> int:
    """Count the records ``first``, ``first + 1``, ... (before ``limit``) whose bytes at ``columns``
    equal record 0's. Each column is one strided slice, compared whole; only a window that
    holds a mismatch is measured byte by byte (lstrip)."""
    end = start + limit * stride
    slices = [raw[start + first * stride + column : end : stride] for column in columns]
    expected = [raw[start + column : start + column + 1] for column in columns]
    if all(map(eq, slices, (byte * (limit - first) for byte in expected))):
        return limit - first
    return min(len(piece) - len(piece.lstrip(byte)) for piece, byte in zip(slices, expected, strict=True))


def iter_run_keys(raw: bytes, run: RecordRun, *, row_checksum: bool = False) -> Iterator[bytes]:
    """Return an iterator over the keys of ``run``'s records, as iter_state_records gives them.

    The keys are cut by struct (KEYS_PER_UNPACK records per call): no bytecode runs per key.
    """
    length, stride = run.key_row_size(row_checksum), run.stride
    offset = 4 + run.key_size - length
    whole = run.count - run.count % KEYS_PER_UNPACK
    tail_at = run.start + whole * stride
    whole_chunks = (
        _key_layout(offset, length, stride, KEYS_PER_UNPACK).iter_unpack(memoryview(raw)[run.start : tail_at])
        if whole
        else ()
    )
    tail = _key_layout(offset, length, stride, run.count - whole).unpack_from(raw, tail_at) if run.count > whole else ()
    return chain(chain.from_iterable(whole_chunks), tail)


@lru_cache(maxsize=1024)
def _key_layout(offset: int, length: int, stride: int, records: int) -> struct.Struct:
    """A struct that cuts the key out of each of ``records`` consecutive records."""
    return struct.Struct("=" + f"{offset}x{length}s{stride - offset - length}x" * records)


def read_size(raw: bytes, pos: int, source: str, what: str) -> int:
    """Return the big-endian int32 at ``pos``; a missing one is a TruncatedFileError."""
    if pos + 4 > len(raw):
        if pos == len(raw) and what == "key size":
            raise TruncatedFileError(source, "the content ends without the -1 end marker", offset=pos)
        raise TruncatedFileError(source, f"the content ends inside a record's {what}", offset=pos)
    return SIZE.unpack_from(raw, pos)[0]


def take(raw: bytes, pos: int, size: int, source: str, what: str) -> bytes:
    """Return ``size`` bytes at ``pos``, checking first that they are there."""
    _check_available(raw, pos, size, source, what)
    return raw[pos : pos + size]


def _check_available(raw: bytes, pos: int, size: int, source: str, what: str) -> None:
    """Raise TruncatedFileError unless ``size`` bytes follow ``pos`` (the size field before it)."""
    if pos + size > len(raw):
        raise TruncatedFileError(
            source, f"a record's {what} announces {size} bytes, only {len(raw) - pos} remain", offset=pos - 4
        )


def check_removal(removals_allowed: bool, value_size: int, source: str, pos: int) -> None:
    """Refuse a removal in a snapshot, as readSnapshotFile does."""
    if not removals_allowed:
        raise CorruptFileError(source, f"negative value size {value_size} in a snapshot", offset=pos)


def strip_checksum(row: bytes, source: str, pos: int) -> bytes:
    """Drop the 4-byte row checksum KeyValueChecksumEncoder puts before a row."""
    if len(row) < CHECKSUM_PREFIX_BYTES:
        raise _short_row_error(len(row), source, pos)
    return row[CHECKSUM_PREFIX_BYTES:]


def _short_row_error(size: int, source: str, pos: int) -> CorruptFileError:
    return CorruptFileError(source, f"a {size}-byte row is too short for its row checksum", offset=pos)
