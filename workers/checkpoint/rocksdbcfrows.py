"""Rows of a RocksDB state store with column families (Spark 4's transformWithState), by family.

Spark 4 keeps every column family of a store inside RocksDB's one default column family
("virtual column families", RocksDB.scala): each key starts with its family's id, a 2-byte
short in the host's byte order (Platform.putShort: little-endian on x86 and ARM), then the key
as the family's key encoder wrote it. The zip's metadata maps names to ids
(``columnFamilyMapping``) and says which families are Spark's own (``columnFamilyTypeMap``:
true for timers, TTL indexes, list counters). A version loads as for other RocksDB stores
(rocksdbrows.plan_rocksdb_load: a zip, then changelogs), with the record types only stores
with column families write (changelog v2/v4):

- merge: RocksDB's StringAppendOperator (the merge operator Spark opens RocksDB with) appends
  the operand to the key's value after a ',' byte: a ListState's appends;
- delete range: every key from the record's key (included) to its value (excluded) goes.

A version loaded from changelogs alone (no zip yet) has no name mapping: families are then
named by their id (``#3``), as nothing on storage names them.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from .errors import CorruptFileError
from .rocksdbinstance import RocksDBInstance, open_rocksdb_instance
from .rocksdbrows import STATE_ENCODING_VERSION, plan_rocksdb_load
from .rocksdbstate import read_changelog
from .stateinventory import StateStoreDir
from .storage.checkpointstorage import CheckpointStorage

COLUMN_FAMILY_ID_BYTES = 2  # RocksDBStateStoreProvider.VIRTUAL_COL_FAMILY_PREFIX_BYTES
MERGE_DELIMITER = b","  # StringAppendOperator's default delimiter


@dataclass(frozen=True, slots=True)
class ColumnFamilyRow:
    """One live key of a family: the key without the family id, its value, the file it came from."""

    family_id: int
    key: bytes
    value: bytes
    source: str


@dataclass(frozen=True, slots=True)
class ColumnFamilyFigures:
    """Rows (RocksDB keys), values and bytes (keys with their id, and values) of one family.

    ``values`` is the rows Spark's ``statestore`` reader returns with flattenCollectionTypes:
    the list elements for a family holding lists, else the rows.
    """

    name: str
    family_id: int
    internal: bool
    rows: int
    values: int
    bytes: int


@dataclass(frozen=True, slots=True)
class ColumnFamilyStore:
    """The families of a store at a version: id -> name, the internal names, and its rows."""

    version: int
    names: dict[int, str]
    internal_names: frozenset[str]
    rows: Iterator[ColumnFamilyRow]

    def name_of(self, family_id: int) -> str:
        return self.names.get(family_id, f"#{family_id}")


@dataclass(slots=True)
class _Change:
    """The last word of the changelogs on a key. ``appends_to_zip``: ``value`` holds merge operands
    that go after the zip's value of the key (when the zip has one)."""

    value: bytes | None
    source: str
    appends_to_zip: bool = False


@dataclass(slots=True)
class _Replay:
    """Changelog records applied in order, as RocksDB applies them on top of the zip."""

    changes: dict[bytes, _Change] = field(default_factory=dict)
    deleted_ranges: list[tuple[bytes, bytes]] = field(default_factory=list)

    def apply(self, record_type: str, key: bytes, value: bytes | None, source: str) -> None:
        if record_type == "merge":
            self._merge(key, value or b"", source)
        elif record_type == "delete_range":
            self._delete_range(key, value or b"", source)
        else:  # put, or delete (value None)
            self.changes[key] = _Change(value, source)

    def _merge(self, key: bytes, operand: bytes, source: str) -> None:
        change = self.changes.get(key)
        if change is None:
            self.changes[key] = _Change(operand, source, appends_to_zip=not self.in_deleted_range(key))
        elif change.value is None:
            self.changes[key] = _Change(operand, source)
        else:
            self.changes[key] = _Change(change.value + MERGE_DELIMITER + operand, source, change.appends_to_zip)

    def _delete_range(self, start: bytes, end: bytes, source: str) -> None:
        for key in [key for key in self.changes if start <= key < end]:
            self.changes[key] = _Change(None, source)
        self.deleted_ranges.append((start, end))

    def in_deleted_range(self, key: bytes) -> bool:
        return any(start <= key < end for start, end in self.deleted_ranges)


@contextlib.contextmanager
def open_column_family_rows(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None,
    unique_id: str | None = None,
    max_read_bytes: int | None = None,
) -> Iterator[ColumnFamilyStore]:
    """Yield the families of ``store`` at ``version`` and an iterator over its live rows.

    Raises as rocksdbrows.read_rocksdb_rows (MissingFileError, CheckpointError over the read
    limit, CorruptFileError naming the damaged zip, SST or changelog), and CorruptFileError for
    a key too short to hold a family id.
    """
    load = plan_rocksdb_load(
        storage,
        store,
        version,
        codec=codec,
        unique_id=unique_id,
        max_read_bytes=max_read_bytes,
        column_families=True,
    )
    replay = _Replay()
    for changelog_file in load.changelogs:
        source = f"{store.path}/{changelog_file.name}"
        for record in read_changelog(storage, source, codec=codec).records:
            replay.apply(record.record_type, record.key, record.value, source)
    metadata = load.metadata
    names = {number: name for name, number in (metadata.column_family_mapping or {}).items()} if metadata else {}
    internal = frozenset(name for name, flag in ((metadata and metadata.column_family_type_map) or {}).items() if flag)
    if load.snapshot is None:
        yield ColumnFamilyStore(version, names, internal, _split_ids(_changed_items(replay.changes)))
        return
    with open_rocksdb_instance(storage, store.path, load.snapshot.name, metadata) as instance:
        yield ColumnFamilyStore(version, names, internal, _split_ids(_merged_items(instance, replay)))


def count_column_family_rows(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None,
    unique_id: str | None = None,
    max_read_bytes: int | None = None,
    list_families: frozenset[str] = frozenset(),
) -> tuple[ColumnFamilyFigures, ...]:
    """Rows, values and bytes of every family at ``version``, by family id (0 for an empty one).

    The values of the families named in ``list_families`` (ListState) are their list elements.
    """
    rows: Counter[int] = Counter()
    values: Counter[int] = Counter()
    sizes: Counter[int] = Counter()
    with open_column_family_rows(
        storage, store, version, codec=codec, unique_id=unique_id, max_read_bytes=max_read_bytes
    ) as families:
        for row in families.rows:
            rows[row.family_id] += 1
            is_list = families.name_of(row.family_id) in list_families
            values[row.family_id] += len(split_list_value(row.value, source=row.source)) if is_list else 1
            sizes[row.family_id] += COLUMN_FAMILY_ID_BYTES + len(row.key) + len(row.value)
        ids = sorted(set(families.names) | set(rows))
        return tuple(
            ColumnFamilyFigures(
                name=families.name_of(family_id),
                family_id=family_id,
                internal=families.name_of(family_id) in families.internal_names,
                rows=rows[family_id],
                values=values[family_id],
                bytes=sizes[family_id],
            )
            for family_id in ids
        )


def _merged_items(instance: RocksDBInstance, replay: _Replay) -> Iterator[tuple[bytes, bytes, str]]:
    """The zip's rows in key order as the changelogs left them, then the keys they added."""
    changes = replay.changes
    for key, value in instance.iter_items():
        change = changes.pop(key, None)
        if change is None:
            if not replay.in_deleted_range(key):
                yield key, value, instance.zip_path
        elif change.appends_to_zip:
            yield key, value + MERGE_DELIMITER + (change.value or b""), change.source
        elif change.value is not None:
            yield key, change.value, change.source
    yield from _changed_items(changes)


def _changed_items(changes: dict[bytes, _Change]) -> Iterator[tuple[bytes, bytes, str]]:
    for key, change in changes.items():
        if change.value is not None:
            yield key, change.value, change.source


def _split_ids(items: Iterator[tuple[bytes, bytes, str]]) -> Iterator[ColumnFamilyRow]:
    for key, value, source in items:
        yield ColumnFamilyRow(family_id_of(key, source=source), key[COLUMN_FAMILY_ID_BYTES:], value, source)


def family_id_of(key: bytes, *, source: str) -> int:
    """The column family id a stored key starts with; CorruptFileError for a key too short to hold one."""
    if len(key) < COLUMN_FAMILY_ID_BYTES:
        raise CorruptFileError(source, f"a key of {len(key)} bytes has no column family id")
    return int.from_bytes(key[:COLUMN_FAMILY_ID_BYTES], "little", signed=True)


def family_key(family_id: int, key: bytes) -> bytes:
    """The key as RocksDB holds it: the family id, then the key (ColumnFamilyRow.key)."""
    return family_id.to_bytes(COLUMN_FAMILY_ID_BYTES, "little", signed=True) + key


def split_list_value(value: bytes, *, source: str) -> list[bytes]:
    """The elements of a ListState value, each as its encoder wrote it (version byte, row).

    MultiValuedStateEncoder writes each element as an int32 size (host order) and the bytes,
    which start with the encoding version byte 0; one merge of several elements concatenates
    them, and RocksDB puts a ',' between the operands of two merges. A ',' is a delimiter where
    reading it as the first byte of a size does not give an element that fits and starts with
    the version byte.
    """
    elements = find_list_elements(value)
    if isinstance(elements, int):
        raise CorruptFileError(
            source,
            f"a list element at byte {elements} of a {len(value)}-byte value does not fit or lacks its version byte",
        )
    return elements


def find_list_elements(value: bytes) -> list[bytes] | int:
    """The elements of ``value`` read as split_list_value reads them, or where an element does not fit."""
    elements: list[bytes] = []
    pos = 0
    while pos < len(value):
        if value[pos : pos + 1] == MERGE_DELIMITER and elements and not _element_fits(value, pos):
            pos += 1
        if not _element_fits(value, pos):
            return pos
        size = int.from_bytes(value[pos : pos + 4], "little", signed=True)
        elements.append(value[pos + 4 : pos + 4 + size])
        pos += 4 + size
    return elements


def _element_fits(value: bytes, pos: int) -> bool:
    size = int.from_bytes(value[pos : pos + 4], "little", signed=True)
    return len(value) - pos >= 4 and 0 < size <= len(value) - pos - 4 and value[pos + 4] == STATE_ENCODING_VERSION
