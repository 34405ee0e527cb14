"""The key set of a RocksDB store with column families, kept so the next version's figures cost one changelog.

A store with column families (transformWithState, stream-stream join state formats 3 and 4)
holds every family in RocksDB's one default column family, each key starting with its family's
id (rocksdbcfrows.py). Like statekeys.StateKeys, the keys are kept as sorted 128-bit digests (of
the whole key, family id included); each has three figures beside it, what the per-family counts
of rocksdbcfrows.count_column_family_rows need: its family id, its bytes (key with its id, and
value) and its list elements (split_list_value; -1 when the value does not read as a list).
The family names are those of the cold read the set started from (the zip's
``columnFamilyMapping``, and which are Spark's own in ``columnFamilyTypeMap``): the follow
reads a version with a zip cold again (statefollow._family_step).

A changelog v2/v4 (rocksdbchangelog.py) applies record by record, as RocksDB applies it:

- put: the key's value is replaced; delete: the key goes;
- merge: StringAppendOperator appends the operand after a ',' to the key's value, or the operand
  is the value of an absent key;
- delete range: the keys between two keys go. Digests have no order to find them by, so such a
  changelog raises MissingFileError and the caller reads the version cold.

Stored as a key-set file of format 2 (statekeys.py's header), all integers big-endian::

    header       magic, format 2, version, count (statekeys)
    names size   u32, then that many bytes of JSON: {"names": {"<id>": "<name>"}, "internal": [<name>]}
    digests      count x 16 bytes, sorted ascending
    families     count x int16
    bytes        count x int64
    elements     count x int64
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import CorruptFileError, MissingFileError, TruncatedFileError
from .logfile import JsonSite, decode_text, parse_json_object
from .rocksdbcfrows import ColumnFamilyFigures, ColumnFamilyStore, family_id_of, family_key, find_list_elements
from .rocksdbchangelog import parse_changelog
from .statekeys import (
    DIGEST,
    FAMILY_FORMAT,
    HEADER_BYTES,
    StateKeys,
    digests_of,
    find_digests,
    pack_key_set_header,
    parse_digests,
    parse_key_set_header,
    parse_state_keys,
)

_NAMES_SIZE = struct.Struct(">I")
_COLUMNS = (("families", np.dtype(">i2")), ("sizes", np.dtype(">i8")), ("elements", np.dtype(">i8")))
# What one key costs in memory and on disk: its digest and its three figures.
FAMILY_KEY_BYTES = DIGEST.itemsize + sum(dtype.itemsize for _, dtype in _COLUMNS)
_NOT_A_LIST = -1


@dataclass(frozen=True, slots=True, eq=False)
class FamilyKeys:
    """The keys of a store with column families at ``version``, sorted by digest, with their figures."""

    version: int
    digests: np.ndarray
    families: np.ndarray
    sizes: np.ndarray
    elements: np.ndarray
    names: Mapping[int, str]
    internal_names: frozenset[str]

    @property
    def rows(self) -> int:
        return len(self.digests)

    def same_keys(self, other: FamilyKeys) -> bool:
        return self.rows == other.rows and all(
            np.array_equal(getattr(self, name), getattr(other, name)) for name in ("digests", *_column_names())
        )

    def family_figures(self, list_families: frozenset[str], *, source: str) -> tuple[ColumnFamilyFigures, ...]:
        """Rows, values and bytes of every family, as count_column_family_rows counts them.

        Raises CorruptFileError naming ``source`` (the store) when a value of a family in
        ``list_families`` does not read as a list (the full pass's reader names its file).
        """
        ids, index = np.unique(self.families.astype(np.int64), return_inverse=True)
        rows = np.bincount(index, minlength=len(ids))
        sizes = np.bincount(index, weights=self.sizes, minlength=len(ids))
        elements = np.bincount(index, weights=self.elements, minlength=len(ids))
        not_lists = np.bincount(index, weights=self.elements == _NOT_A_LIST, minlength=len(ids))
        counted = {
            int(i): (int(rows[n]), int(elements[n]), int(sizes[n]), bool(not_lists[n])) for n, i in enumerate(ids)
        }
        figures = []
        for family_id in sorted(set(self.names) | set(counted)):
            name = self.names.get(family_id, f"#{family_id}")
            count, values, size, has_others = counted.get(family_id, (0, 0, 0, False))
            if name in list_families and has_others:
                raise CorruptFileError(source, f"a value of the list {name!r} does not read as list elements")
            values = values if name in list_families else count
            figures.append(ColumnFamilyFigures(name, family_id, name in self.internal_names, count, values, size))
        return tuple(figures)

    def to_bytes(self) -> bytes:
        names = {"names": {str(k): v for k, v in sorted(self.names.items())}, "internal": sorted(self.internal_names)}
        text = json.dumps(names, sort_keys=True).encode()
        columns = b"".join(getattr(self, name).astype(dtype).tobytes() for name, dtype in _COLUMNS)
        return (
            pack_key_set_header(FAMILY_FORMAT, self.version, self.rows)
            + _NAMES_SIZE.pack(len(text))
            + text
            + self.digests.tobytes()
            + columns
        )


def family_keys_of(store: ColumnFamilyStore) -> FamilyKeys:
    """The key set of a version's live rows (rocksdbcfrows.open_column_family_rows: each key once)."""
    keys, families, sizes, elements = [], [], [], []
    for row in store.rows:
        keys.append(family_key(row.family_id, row.key))
        families.append(row.family_id)
        sizes.append(len(keys[-1]) + len(row.value))
        elements.append(_elements(row.value))
    digests = digests_of(keys)
    order = np.argsort(digests, kind="stable")
    return FamilyKeys(
        store.version,
        digests[order],
        np.array(families, dtype=np.int16)[order],
        np.array(sizes, dtype=np.int64)[order],
        np.array(elements, dtype=np.int64)[order],
        dict(store.names),
        store.internal_names,
    )


def follow_family_changelog(
    previous: FamilyKeys, data: bytes, *, version: int, source: str, codec: str | None
) -> FamilyKeys:
    """The key set after the RocksDB changelog ``data`` (the file as stored) of ``version``.

    Raises ValueError unless ``version`` follows ``previous.version``, MissingFileError for a
    changelog without column families or with a delete range (the version needs a cold read),
    and the codec's and changelog reader's errors, naming ``source``, for a damaged file.
    """
    if version != previous.version + 1:
        raise ValueError(f"version {version} does not follow the key set's version {previous.version}")
    changelog = parse_changelog(data, source=source, codec=codec)
    if not changelog.has_column_families or any(r.record_type == "delete_range" for r in changelog.records):
        raise MissingFileError(source, "a changelog without column families or with a delete range is read cold")
    keys = list(dict.fromkeys(record.key for record in changelog.records))
    digests = digests_of(keys)
    at, found = find_digests(previous.digests, digests)
    # (family, bytes, elements) of the changed keys the previous version holds.
    before: dict[bytes, tuple[int, int, int] | None] = {
        key: (int(previous.families[i]), int(previous.sizes[i]), int(previous.elements[i]))
        for key, i, is_there in zip(keys, at, found, strict=True)
        if is_there
    }
    last = _apply_records(changelog.records, before, source)
    return _merged(previous, version, at[found], keys, digests, last)


def _apply_records(
    records: Iterable[Any], figures: dict[bytes, tuple[int, int, int] | None], source: str
) -> dict[bytes, tuple[int, int, int] | None]:
    """Each key's (family, bytes, elements) after the records, in file order; None: deleted."""
    for record in records:
        key, value = record.key, record.value or b""
        if record.record_type == "delete":
            figures[key] = None
        elif record.record_type == "merge" and figures.get(key) is not None:
            family, size, elements = figures[key]
            added = _elements(value)
            joined = _NOT_A_LIST if _NOT_A_LIST in (elements, added) else elements + added
            figures[key] = (family, size + 1 + len(value), joined)  # StringAppendOperator's ','
        else:  # a put, or a merge into an absent key
            figures[key] = (family_id_of(key, source=source), len(key) + len(value), _elements(value))
    return figures


def _merged(
    previous: FamilyKeys,
    version: int,
    changed_at: np.ndarray,
    keys: list[bytes],
    digests: np.ndarray,
    last: Mapping[bytes, tuple[int, int, int] | None],
) -> FamilyKeys:
    """``previous`` without the changed keys it held, with the changed keys that are live."""
    arrays = {name: np.delete(getattr(previous, name), changed_at) for name in ("digests", *_column_names())}
    live = [(digest, last[key]) for key, digest in zip(keys, digests, strict=True) if last.get(key) is not None]
    new_digests = np.array([digest for digest, _ in live], dtype=DIGEST)
    order = np.argsort(new_digests, kind="stable")
    at = np.searchsorted(arrays["digests"], new_digests[order])
    arrays["digests"] = np.insert(arrays["digests"], at, new_digests[order])
    for column, (name, _) in enumerate(_COLUMNS):
        values = np.array([figures[column] for _, figures in live], dtype=getattr(previous, name).dtype)
        arrays[name] = np.insert(arrays[name], at, values[order])
    return FamilyKeys(version, names=previous.names, internal_names=previous.internal_names, **arrays)


def parse_key_set(data: bytes, *, source: str) -> StateKeys | FamilyKeys:
    """Read a key-set file of either format (StateKeys.to_bytes, FamilyKeys.to_bytes).

    Raises as statekeys.parse_state_keys, and CorruptFileError for family names that do not read.
    """
    file_format, version, count = parse_key_set_header(data, source=source)
    if file_format != FAMILY_FORMAT:
        return parse_state_keys(data, source=source)
    if len(data) < HEADER_BYTES + _NAMES_SIZE.size:
        raise TruncatedFileError(source, "the file ends before the size of its family names")
    (names_size,) = _NAMES_SIZE.unpack_from(data, HEADER_BYTES)
    start = HEADER_BYTES + _NAMES_SIZE.size
    expected = start + names_size + count * FAMILY_KEY_BYTES
    if len(data) != expected:
        raise TruncatedFileError(source, f"{count} keys announced: expected {expected} bytes, found {len(data)}")
    names, internal = _parse_names(data[start : start + names_size], source, start)
    pos = start + names_size
    digests = parse_digests(data, pos, count, source=source)
    pos += count * DIGEST.itemsize
    columns = {}
    for name, dtype in _COLUMNS:
        columns[name] = np.frombuffer(data, dtype=dtype, count=count, offset=pos).astype(dtype.newbyteorder("="))
        pos += count * dtype.itemsize
    return FamilyKeys(version, digests, names=names, internal_names=internal, **columns)


def _parse_names(data: bytes, source: str, offset: int) -> tuple[dict[int, str], frozenset[str]]:
    site = JsonSite(source, "family names", offset)
    document = parse_json_object(decode_text(data, source=source, offset=offset), site)
    names, internal = document.get("names"), document.get("internal")
    is_names = isinstance(names, dict) and all(k.lstrip("-").isdigit() and isinstance(v, str) for k, v in names.items())
    if not is_names or not (isinstance(internal, list) and all(isinstance(name, str) for name in internal)):
        raise site.error("expected {'names': {id: name}, 'internal': [name]}")
    return {int(k): v for k, v in names.items()}, frozenset(internal)


def _elements(value: bytes) -> int:
    elements = find_list_elements(value)
    return _NOT_A_LIST if isinstance(elements, int) else len(elements)


def _column_names() -> tuple[str, ...]:
    return tuple(name for name, _ in _COLUMNS)
