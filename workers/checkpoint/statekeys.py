"""The set of keys of one state store version, kept so the next version's rows cost one file.

Rows at version V + 1 are the keys at V, less the keys V + 1's delta (HDFS) or changelog
(RocksDB) removes, plus the keys it puts, the last change of a key in the file winning as
Spark's replay does (HDFSBackedStateStoreProvider.updateFromDeltaFile, RocksDB.replayChangelog).
A put of a key already there overwrites it; a removal of an absent key changes nothing.

Keys are kept as 128-bit digests (xxh3_128), sorted, in a numpy array of 16-byte items: 16 bytes
a row whatever the key's size, and a new version merges in by binary search. Two keys share a
digest with a probability of about n² / 2¹²⁹: nil for any state Spark holds.

Stored as a file (see StateKeys.to_bytes / parse_state_keys):

    magic  b"CKWSKEYS"   8 bytes
    format u32 big-endian  (1)
    version i64 big-endian  the state store version the keys are of
    count   i64 big-endian  the number of digests that follow
    digests count x 16 bytes, sorted ascending (as bytes)

Format 2 is the key set of a store with column families (statefamilykeys.py): the same header,
then the family names and a few figures of each key.
"""

from __future__ import annotations

import operator
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import compress

import numpy as np
import xxhash

from .errors import CheckpointError, CorruptFileError, TruncatedFileError
from .rocksdbchangelog import parse_changelog
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .staterows import REMOVED, apply_delta

MAGIC = b"CKWSKEYS"
FORMAT = 1
FAMILY_FORMAT = 2  # statefamilykeys.FamilyKeys
_HEADER = struct.Struct(">8sIqq")
DIGEST = np.dtype("V16")
# Changes of a RocksDB changelog that have a key set meaning: put and delete (default column family).
_KEY_CHANGES = {"put": True, "delete": False}


@dataclass(frozen=True, slots=True, eq=False)
class StateKeys:
    """The digests of the keys of one store at ``version``, sorted; ``rows`` is their number."""

    version: int
    digests: np.ndarray

    @property
    def rows(self) -> int:
        return len(self.digests)

    def to_bytes(self) -> bytes:
        return pack_key_set_header(FORMAT, self.version, self.rows) + self.digests.tobytes()

    def same_keys(self, other: StateKeys) -> bool:
        return self.rows == other.rows and bool(np.array_equal(self.digests, other.digests))


def state_keys_of(keys: Iterable[bytes], *, version: int) -> StateKeys:
    """The key set of ``keys`` (each once or not; a cold read of a version gives them)."""
    return StateKeys(version, np.unique(digests_of(keys)))


def apply_key_changes(previous: StateKeys, changes: Iterable[tuple[bytes, bool]], *, version: int) -> StateKeys:
    """Apply (key, is_put) changes, in file order, to ``previous``; return the set at ``version``.

    Raises ValueError unless ``version`` follows ``previous.version`` (the caller reads versions
    in turn; a gap needs a cold read).
    """
    last = dict(changes)
    is_put = list(last.values())
    return apply_last_changes(previous, last, is_put, version=version)


def apply_last_changes(
    previous: StateKeys, keys: Iterable[bytes], is_put: Iterable[bool], *, version: int
) -> StateKeys:
    """Apply the last change of each key (each key once: put when its ``is_put`` is true, else removed).

    Raises ValueError unless ``version`` follows ``previous.version``.
    """
    if version != previous.version + 1:
        raise ValueError(f"version {version} does not follow the key set's version {previous.version}")
    keys, is_put = list(keys), list(is_put)
    put = sorted_digests(compress(keys, is_put))
    removed = sorted_digests(compress(keys, map(operator.not_, is_put)))
    digests = previous.digests
    at, found = find_digests(digests, removed)
    digests = np.delete(digests, at[found])
    at, found = find_digests(digests, put)
    return StateKeys(version, np.insert(digests, at[~found], put[~found]))


def follow_delta(
    previous: StateKeys, data: bytes, *, version: int, source: str, codec: str | None, row_checksum: bool = False
) -> StateKeys:
    """The key set after the HDFS delta ``data`` (the file as stored) of ``version``.

    Raises the codec's and statefiles' errors, naming ``source``, for a damaged file.
    """
    raw = decompress_state_file(data, source=source, codec=codec, max_bytes=MAX_STATE_FILE_BYTES)
    # staterows' run readers: the last change of each key, in file order, with every record checked.
    changes: dict[bytes, int] = {}
    apply_delta(raw, source, changes, row_checksum=row_checksum, keep_removals=True)
    return apply_last_changes(previous, changes, map(REMOVED.__ne__, changes.values()), version=version)


def follow_changelog(previous: StateKeys, data: bytes, *, version: int, source: str, codec: str | None) -> StateKeys:
    """The key set after the RocksDB changelog ``data`` (the file as stored) of ``version``.

    Raises CheckpointError naming ``source`` for a changelog with column families or with
    merge / delete-range records (those are followed by statefamilykeys.follow_family_changelog),
    and the codec's and changelog reader's errors for a damaged file.
    """
    changelog = parse_changelog(data, source=source, codec=codec)
    if changelog.has_column_families:
        raise CheckpointError(source, "the store has column families (transformWithState): no key set of them is kept")
    unknown = {record.record_type for record in changelog.records} - _KEY_CHANGES.keys()
    if unknown:
        raise CheckpointError(source, f"{', '.join(sorted(unknown))} records: only puts and deletes are followed")
    changes = ((record.key, _KEY_CHANGES[record.record_type]) for record in changelog.records)
    return apply_key_changes(previous, changes, version=version)


HEADER_BYTES = _HEADER.size


def pack_key_set_header(file_format: int, version: int, count: int) -> bytes:
    return _HEADER.pack(MAGIC, file_format, version, count)


def parse_state_keys_header(data: bytes, *, source: str) -> tuple[int, int]:
    """Return (version, count) from the first HEADER_BYTES of a key-set file; raises as parse_state_keys."""
    return parse_key_set_header(data, source=source)[1:]


def parse_key_set_header(data: bytes, *, source: str) -> tuple[int, int, int]:
    """Return (format, version, count) of a key-set file of either format; raises as parse_state_keys."""
    if len(data) < _HEADER.size:
        raise TruncatedFileError(source, f"{len(data)} bytes, shorter than the {_HEADER.size}-byte header")
    magic, file_format, version, count = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise CorruptFileError(source, f"not a key-set file (magic {magic!r})", offset=0)
    if file_format not in (FORMAT, FAMILY_FORMAT):
        raise CorruptFileError(
            source, f"key-set format {file_format}, this version reads {FORMAT} and {FAMILY_FORMAT}", offset=8
        )
    if count < 0 or version < 0:
        raise CorruptFileError(source, f"negative version {version} or count {count}", offset=12)
    return file_format, version, count


def parse_state_keys(data: bytes, *, source: str) -> StateKeys:
    """Read a key-set file written by StateKeys.to_bytes.

    Raises CorruptFileError for another magic or format, a negative count or unsorted digests,
    TruncatedFileError when the digests announced are not all there.
    """
    file_format, version, count = parse_key_set_header(data, source=source)
    if file_format != FORMAT:
        raise CorruptFileError(source, "the key set of a store with column families (statefamilykeys)", offset=8)
    expected = _HEADER.size + count * DIGEST.itemsize
    if len(data) != expected:
        raise TruncatedFileError(source, f"{count} digests announced: expected {expected} bytes, found {len(data)}")
    return StateKeys(version, parse_digests(data, _HEADER.size, count, source=source))


def parse_digests(data: bytes, offset: int, count: int, *, source: str) -> np.ndarray:
    """``count`` digests from ``offset`` (the caller checked they are there); raises unless sorted and distinct."""
    digests = np.frombuffer(data, dtype=DIGEST, count=count, offset=offset)
    if not _is_strictly_ascending(digests):
        raise CorruptFileError(source, "digests are not sorted and distinct")
    return digests


def digests_of(keys: Iterable[bytes]) -> np.ndarray:
    """The digest of each key, in the keys' order."""
    return np.frombuffer(b"".join(map(xxhash.xxh3_128_digest, keys)), dtype=DIGEST)


def sorted_digests(keys: Iterable[bytes]) -> np.ndarray:
    return np.sort(digests_of(keys))


def _is_strictly_ascending(digests: np.ndarray) -> bool:
    """Compare neighbours as (high, low) big-endian halves: the order np.sort gives 16-byte items."""
    halves = digests.view(">u8").reshape(-1, 2)
    high, low = halves[:, 0], halves[:, 1]
    rising = (high[1:] > high[:-1]) | ((high[1:] == high[:-1]) & (low[1:] > low[:-1]))
    return bool(np.all(rising))


def find_digests(digests: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of ``wanted`` (sorted) is or would go in ``digests``, and whether it is there."""
    at = np.searchsorted(digests, wanted)
    found = np.zeros(len(wanted), dtype=bool)
    inside = at < len(digests)
    found[inside] = digests[at[inside]] == wanted[inside]
    return at, found
