"""A sample of the decoded rows of one state store at one version.

HDFS-backed stores: loading version V is HDFSBackedStateStoreProvider.loadMap: start from the
latest snapshot at or below V (or from an empty map), then replay every delta after it up to V,
where a put replaces the key's value and a removal drops the key. Keys are compared as bytes, as
UnsafeRow.equals does. RocksDB stores: the zip's SST files plus the changelogs after it
(rocksdbrows.py); a stored key or value is an encoding version byte, then its UnsafeRow. The
rows then go through the UnsafeRow decoder with the store's key and value schemas.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from typing import TYPE_CHECKING, Any

from .errors import CheckpointError
from .rocksdbfiles import parse_rocksdb_store_files
from .rocksdbrows import open_rocksdb_rows, strip_encoding_version
from .sparktypes import StructType
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .statefiles import iter_state_records
from .stateinventory import StateStoreDir, detect_provider, files_for_version, parse_hdfs_state_files
from .unsaferow import decode_unsafe_row

if TYPE_CHECKING:
    # Annotations only: the sampler needs just the methods of CheckpointStorage.
    from .storage.checkpointstorage import CheckpointStorage


def versions_on_storage(store_dir: StateStoreDir) -> tuple[int, ...]:
    """The versions whose own file the listing holds (a delta or snapshot; a changelog or zip), ascending.

    Spark's maintenance deletes old versions: a version from an earlier listing may be gone, and
    these are the ones a sample can still start from.
    """
    if detect_provider(store_dir.files) == "rocksdb":
        return parse_rocksdb_store_files(store_dir.files).versions
    files, _ = parse_hdfs_state_files(store_dir.files)
    return tuple(f.version for f in files)


@dataclass(frozen=True, slots=True)
class DecodedStateRow:
    """One key and its value, decoded (``{field name: value}``, see decode_unsafe_row)."""

    key: dict[str, Any]
    value: dict[str, Any]


def sample_state_rows(
    storage: CheckpointStorage,
    store_dir: StateStoreDir,
    version: int,
    *,
    limit: int,
    key_schema: StructType,
    value_schema: StructType,
    codec: str | None,
    row_checksum: bool,
    unique_id: str | None = None,
    max_read_bytes: int | None = None,
) -> list[DecodedStateRow]:
    """Decode up to ``limit`` rows of ``store_dir`` at state ``version``.

    HDFS rows come in the order the files hold them (snapshot first, then deltas); RocksDB rows
    in the zip's key order, then the keys the changelogs added. ``codec`` and ``row_checksum``
    are the query's, from the offset log's conf; ``unique_id`` is the version's state unique id
    (RocksDB checkpoint format 2). Raises MissingFileError when a file the version needs is
    gone, CheckpointError when it cannot be read here (RocksDB: see read_rocksdb_rows), and
    CorruptFileError (from the file, or from a row: then the byte offset counts from the row's
    start).
    """
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if detect_provider(store_dir.files) == "rocksdb":
        if row_checksum:
            raise CheckpointError(store_dir.path, "RocksDB rows written with row checksums are not decoded by ckptweb")
        stored = _first_rocksdb_rows(storage, store_dir, version, limit, codec, unique_id, max_read_bytes)
    else:
        rows = load_state_rows(storage, store_dir, version, codec=codec, row_checksum=row_checksum)
        stored = [(key, value, source) for key, (value, source) in islice(rows.items(), limit)]
    return [
        DecodedStateRow(
            key=decode_unsafe_row(key, key_schema, source=source, what="key row"),
            value=decode_unsafe_row(value, value_schema, source=source, what="value row"),
        )
        for key, value, source in stored
    ]


def _first_rocksdb_rows(
    storage: CheckpointStorage,
    store_dir: StateStoreDir,
    version: int,
    limit: int,
    codec: str | None,
    unique_id: str | None,
    max_read_bytes: int | None,
) -> list[tuple[bytes, bytes, str]]:
    """The first ``limit`` rows as UnsafeRows (the encoding version byte checked and cut off)."""
    with open_rocksdb_rows(
        storage, store_dir, version, codec=codec, unique_id=unique_id, max_read_bytes=max_read_bytes
    ) as rows:
        return [
            (
                strip_encoding_version(key, source=source, what="key"),
                strip_encoding_version(value, source=source, what="value"),
                source,
            )
            for key, value, source in islice(rows, limit)
        ]


def load_state_rows(
    storage: CheckpointStorage, store_dir: StateStoreDir, version: int, *, codec: str | None, row_checksum: bool
) -> dict[bytes, tuple[bytes, str]]:
    """Rebuild the store's map at ``version``: key bytes -> (value bytes, path of the file that put it)."""
    if detect_provider(store_dir.files) == "rocksdb":
        raise CheckpointError(
            store_dir.path, "a RocksDB store has no map of files to rebuild: see rocksdbrows.open_rocksdb_rows"
        )
    state_files, _ = parse_hdfs_state_files(store_dir.files)
    rows: dict[bytes, tuple[bytes, str]] = {}
    for state_file in files_for_version(state_files, version, source=store_dir.path):
        path = f"{store_dir.path}/{state_file.name}"
        raw = decompress_state_file(storage.read_bytes(path, max_bytes=MAX_STATE_FILE_BYTES), source=path, codec=codec)
        records = iter_state_records(
            raw, source=path, row_checksum=row_checksum, removals_allowed=not state_file.is_snapshot
        )
        for record in records:
            if record.value is None:
                rows.pop(record.key, None)
            else:
                rows[record.key] = (record.value, path)
    return rows
