"""RocksDBStateStoreProvider files: inventory, zip metadata, changelogs and load chains.

A RocksDB store directory ``state/<op>/<part>[/<store>]/`` (RocksDBFileManager) holds::

    <v>.zip, <v>.changelog                checkpoint format 1
    <v>_<uuid>.zip, <v>_<uuid>.changelog  checkpoint format 2 (Spark 4.0+): the uuid is the state
                                          unique id that the commit log records for version v
    SSTs/<n>-<uuid>.sst                   RocksDB data files, shared by the zips that list them
    logs/<n>-<uuid>.log                   archived write-ahead logs, when there are any

``<v>.zip`` (java.util.zip) holds RocksDB's CURRENT, MANIFEST-*, OPTIONS-* and ``metadata``: the
line ``v1`` then one JSON object (RocksDBCheckpointMetadata) listing the SST and log files of the
version and its ``numKeys`` (-1 when row tracking is off).

A changelog is compressed with the state store codec (statecodec.py); inside (StateStoreChangelog,
big-endian ints)::

    v1  no header; records framed like an HDFS delta (statefiles.py); int32 -1 ends
    v2  writeUTF("v2"); per record a type byte, int32 key length, key, then int32 value length
        and value (put 0x01, merge 0x11, delete range 0x20 whose value is the end key) or
        int32 -1 (delete 0x10); the type byte 0x00 ends
    v3  writeUTF("v3"), writeUTF(lineage JSON), then v1 records
    v4  writeUTF("v4"), writeUTF(lineage JSON), then v2 records

The lineage ``[{"version":v,"checkpointUniqueId":"<uuid>"},...]`` runs from the newest snapshot
to v - 1. Spark sniffs the version with readUTF: whatever does not read as ``v<n>`` is v1. v2/v4
are written when the store has column families (transformWithState), v3/v4 under format 2.

Loading version V (RocksDB.load): format 1 takes the newest ``<s>.zip`` with s <= V (none: the
empty version 0) and replays changelogs s+1..V; format 2 takes ``V_<id>.zip`` if present, else
the newest zip named in the lineage of ``V_<id>.changelog`` and replays the lineage's changelogs.
A zip also needs every SST and log file its metadata lists.

Row counts here are the cheap ones, for every version: a zip's ``numKeys`` is the count at its
version, and a replay from version 0 counts the keys exactly. On top of a zip whether a put adds
a key or overwrites one is only known from the zip's SST files: rocksdbrows.py reads them, for
one version at a time.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .commits import CommitMetadata
from .errors import CheckpointError, CorruptFileError, TruncatedFileError, UnsupportedVersionError
from .logfile import JsonSite, get_long, get_object, parse_json_object, parse_json_value
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .statefiles import iter_state_records, read_size, strip_checksum, take
from .stateinventory import StateFileInfo, StateStoreDir
from .stateschema import decode_modified_utf8
from .storage import CheckpointStorage

SST_DIR = "SSTs"
LOG_DIR = "logs"
ZIP_METADATA_ENTRY = "metadata"
CHECKPOINT_METADATA_VERSION = 1  # RocksDBCheckpointMetadata.VERSION, 3.2 to 4.3
CHANGELOG_MAX_VERSION = 4
# A zip holds RocksDB's small bookkeeping files, not data (that is in SSTs/); the bounds only stop
# a damaged or hostile file from exhausting a worker's memory.
MAX_ZIP_BYTES = 256 * 1024 * 1024
MAX_ZIP_METADATA_BYTES = 64 * 1024 * 1024

# RecordType.getRecordTypeAsByte (Spark 4.3 adds delete range).
_EOF_RECORD = 0x00
_RECORD_TYPES = {0x01: "put", 0x10: "delete", 0x11: "merge", 0x20: "delete_range"}
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_VERSION_FILE = re.compile(rf"(0|[1-9][0-9]{{0,18}})(?:_({_UUID}))?\.(zip|changelog)")
_JAVA_SHORT = re.compile(r"[+-]?[0-9]{1,5}")
# What zipfile raises on damaged archives: bad headers or CRC, cut data, unknown methods, encryption.
ZIP_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    NotImplementedError,
    RuntimeError,
    ValueError,
    OSError,
)


# --- the files of a store directory ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RocksDBVersionFile:
    """A ``<v>[_<uuid>].zip`` or ``.changelog`` file; ``unique_id`` is None in format 1."""

    version: int
    unique_id: str | None
    kind: str  # "zip" | "changelog"
    name: str
    size: int


@dataclass(frozen=True, slots=True)
class RocksDBStoreFiles:
    """What a RocksDB store directory holds; SST and log files by their name in SSTs/ and logs/."""

    zips: tuple[RocksDBVersionFile, ...]
    changelogs: tuple[RocksDBVersionFile, ...]
    sst_files: tuple[StateFileInfo, ...]
    log_files: tuple[StateFileInfo, ...]
    unknown: tuple[str, ...]

    @property
    def checkpoint_format(self) -> int:
        """2 when any version file carries a unique id, else 1."""
        return 2 if any(f.unique_id for f in self.zips + self.changelogs) else 1

    @property
    def versions(self) -> tuple[int, ...]:
        """Every version that has a zip or a changelog, ascending."""
        return tuple(sorted({f.version for f in self.zips + self.changelogs}))

    def find(self, kind: str, version: int, unique_id: str | None) -> RocksDBVersionFile | None:
        """Return the zip or changelog of ``version`` with that unique id, or None."""
        files = self.zips if kind == "zip" else self.changelogs
        return next((f for f in files if f.version == version and f.unique_id == unique_id), None)

    def unique_ids_of(self, version: int) -> tuple[str, ...]:
        """The unique ids of the format-2 files of ``version`` (several after task retries)."""
        return tuple(sorted({f.unique_id for f in self.zips + self.changelogs if f.version == version and f.unique_id}))


def parse_rocksdb_store_files(
    files: Iterable[StateFileInfo], sst_files: Iterable[StateFileInfo] = (), log_files: Iterable[StateFileInfo] = ()
) -> RocksDBStoreFiles:
    """Sort a store directory's listing (and its SSTs/ and logs/ listings) into version files.

    Hadoop ``.crc`` files, Spark's ``<name>.crc`` sidecars and temporary files are left out;
    other names Spark does not write land in ``unknown``.
    """
    versioned, unknown = [], []
    for info in files:
        if info.is_dir or _is_side_file(info.name):
            continue
        match = _VERSION_FILE.fullmatch(info.name)
        if match:
            versioned.append(RocksDBVersionFile(int(match[1]), match[2], match[3], info.name, info.size))
        else:
            unknown.append(info.name)
    versioned.sort(key=lambda f: (f.version, f.unique_id or ""))
    return RocksDBStoreFiles(
        zips=tuple(f for f in versioned if f.kind == "zip"),
        changelogs=tuple(f for f in versioned if f.kind == "changelog"),
        sst_files=_immutable_files(sst_files, ".sst"),
        log_files=_immutable_files(log_files, ".log"),
        unknown=tuple(sorted(unknown)),
    )


def _immutable_files(entries: Iterable[StateFileInfo], suffix: str) -> tuple[StateFileInfo, ...]:
    kept = (entry for entry in entries if entry.name.endswith(suffix) and not _is_side_file(entry.name))
    return tuple(sorted(kept, key=lambda entry: entry.name))


def _is_side_file(name: str) -> bool:
    return name.startswith(".") or name.endswith((".crc", ".tmp"))


# --- <v>.zip: RocksDBCheckpointMetadata ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RocksDBImmutableFile:
    """An SST or archived log file of a version: its local RocksDB name and its name on storage."""

    local_file_name: str
    dfs_file_name: str
    size_bytes: int


@dataclass(frozen=True, slots=True)
class RocksDBCheckpointMetadata:
    """The ``metadata`` entry of a zip. The 4.x column-family fields are None when absent (3.x)."""

    sst_files: tuple[RocksDBImmutableFile, ...]
    log_files: tuple[RocksDBImmutableFile, ...]
    num_keys: int
    num_internal_keys: int
    column_family_mapping: dict[str, int] | None
    column_family_type_map: dict[str, bool] | None
    max_column_family_id: int | None


def parse_rocksdb_zip(
    data: bytes, *, source: str, max_metadata_bytes: int = MAX_ZIP_METADATA_BYTES
) -> RocksDBCheckpointMetadata:
    """Read the ``metadata`` entry of a ``<v>.zip`` and parse it.

    The entry's declared size is checked against ``max_metadata_bytes`` before it is inflated.
    Raises CorruptFileError when the zip cannot be read or has no ``metadata`` entry.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            info = archive.getinfo(ZIP_METADATA_ENTRY)
            if info.file_size > max_metadata_bytes:
                raise CorruptFileError(
                    source,
                    f"zip entry 'metadata' declares {info.file_size} bytes, over the limit of {max_metadata_bytes}",
                )
            text = archive.read(info)
    except KeyError:
        raise CorruptFileError(source, "the zip has no 'metadata' entry (RocksDBCheckpointMetadata)") from None
    except ZIP_ERRORS as exc:
        raise CorruptFileError(source, f"not a readable zip file: {exc}") from None
    return parse_rocksdb_checkpoint_metadata(text, source=source)


def parse_rocksdb_checkpoint_metadata(data: bytes, *, source: str) -> RocksDBCheckpointMetadata:
    """Parse ``v1`` + JSON as RocksDBCheckpointMetadata.readFromFile does (the version must be v1)."""
    header, _, body = data.partition(b"\n")
    if header != b"v1":
        _refuse_metadata_header(header, source)
    site = JsonSite(source, "zip entry 'metadata', line 2", len(header) + 1)
    fields = parse_json_object(decode_modified_utf8(body, source=source, offset=len(header) + 1), site)
    if "numKeys" not in fields:
        raise site.error("'numKeys' is missing")
    return RocksDBCheckpointMetadata(
        sst_files=_immutable_file_list(fields, "sstFiles", "dfsSstFileName", site),
        log_files=_immutable_file_list(fields, "logFiles", "dfsLogFileName", site),
        num_keys=get_long(fields, "numKeys", site),
        num_internal_keys=get_long(fields, "numInternalKeys", site),
        column_family_mapping=_typed_map(fields, "columnFamilyMapping", int, site),
        column_family_type_map=_typed_map(fields, "columnFamilyTypeMap", bool, site),
        max_column_family_id=get_long(fields, "maxColumnFamilyId", site) if "maxColumnFamilyId" in fields else None,
    )


def _refuse_metadata_header(header: bytes, source: str) -> None:
    match = re.fullmatch(rb"v([0-9]{1,9})", header)
    if match and int(match[1]) > CHECKPOINT_METADATA_VERSION:
        raise UnsupportedVersionError(source, found=int(match[1]), supported=CHECKPOINT_METADATA_VERSION)
    reason = f"zip entry 'metadata': Cannot read RocksDB checkpoint metadata of version {header[:20]!r}"
    raise CorruptFileError(source, reason, offset=0)


def _immutable_file_list(
    fields: dict[str, Any], key: str, dfs_key: str, site: JsonSite
) -> tuple[RocksDBImmutableFile, ...]:
    """A list of {"localFileName", dfs_key, "sizeBytes"}; absent (Spark omits empty logFiles) is ()."""
    entries = fields.get(key) or []
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise site.error(f"{key!r} must be a list of objects")
    files = []
    for entry in entries:
        names = entry.get("localFileName"), entry.get(dfs_key)
        if not all(isinstance(name, str) and name for name in names):
            raise site.error(f"a {key} entry lacks 'localFileName' or {dfs_key!r}")
        files.append(RocksDBImmutableFile(names[0], names[1], get_long(entry, "sizeBytes", site)))
    return tuple(files)


def _typed_map(fields: dict[str, Any], key: str, value_type: type, site: JsonSite) -> dict[str, Any] | None:
    mapping = get_object(fields, key, site)
    if mapping is not None and not all(type(value) is value_type for value in mapping.values()):
        raise site.error(f"{key!r} values must be {value_type.__name__}")
    return mapping


# --- changelogs ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LineageItem:
    """One ancestor of a format-2 version: its version and state unique id."""

    version: int
    checkpoint_unique_id: str


@dataclass(frozen=True, slots=True)
class ChangelogRecord:
    """One change (RecordType): "put", "delete" (value None), "merge", "delete_range" (value = end key).

    v1/v3 records are framed like HDFS deltas and read by statefiles.iter_state_records, without
    its flooring of values to 8-byte words (a RocksDB value is one version byte plus an UnsafeRow).
    """

    record_type: str
    key: bytes
    value: bytes | None


@dataclass(frozen=True, slots=True)
class StateStoreChangelog:
    """A decoded changelog: its format version (1-4), lineage (v3/v4) and records in file order."""

    version: int
    lineage: tuple[LineageItem, ...] | None
    records: tuple[ChangelogRecord, ...]

    @property
    def has_column_families(self) -> bool:
        return self.version in (2, 4)


def parse_changelog(
    data: bytes, *, source: str, codec: str | None, row_checksum: bool = False, max_bytes: int = MAX_STATE_FILE_BYTES
) -> StateStoreChangelog:
    """Decompress a changelog file with the state store codec and decode it."""
    raw = decompress_state_file(data, source=source, codec=codec, max_bytes=max_bytes)
    return parse_changelog_content(raw, source=source, row_checksum=row_checksum)


def parse_changelog_content(raw: bytes, *, source: str, row_checksum: bool = False) -> StateStoreChangelog:
    """Decode a decompressed changelog; offsets in errors are positions in ``raw``.

    ``row_checksum`` (the offset log's ``rowChecksum.enabled``) strips the 4-byte checksum from
    put values and delete keys, as statefiles does.
    """
    version, pos = sniff_changelog_version(raw, source=source)
    lineage = None
    if version >= 3:
        lineage, pos = _read_lineage(raw, pos, source)
    if version in (1, 3):
        records = _framed_like_delta(raw, pos, source, row_checksum)
    else:
        records = tuple(_iter_typed_records(raw, pos, source, row_checksum))
    return StateStoreChangelog(version, lineage, records)


def sniff_changelog_version(raw: bytes, *, source: str) -> tuple[int, int]:
    """Return the changelog version and where the records (or lineage) start, as Spark decides.

    StateStoreChangelogReaderFactory: readUTF(); EOF, malformed UTF-8, no leading "v" or a bad
    number all mean v1 (which has no header). Raises for a well-formed version Spark has no
    reader for.
    """
    length = int.from_bytes(raw[:2], "big") if len(raw) >= 2 else -1
    if length < 0 or 2 + length > len(raw):
        return 1, 0
    try:
        text = decode_modified_utf8(raw[2 : 2 + length], source=source, offset=2)
    except CorruptFileError:
        return 1, 0
    if not (text.startswith("v") and _JAVA_SHORT.fullmatch(text[1:]) and -(2**15) <= int(text[1:]) < 2**15):
        return 1, 0
    version = int(text[1:])
    if version == 1:
        return 1, 0  # StateStoreChangelogReaderV1 reads from the first byte
    if version > CHANGELOG_MAX_VERSION:
        raise UnsupportedVersionError(source, found=version, supported=CHANGELOG_MAX_VERSION)
    if version < 1 or text != f"v{version}":
        raise CorruptFileError(source, f"changelog version header {text[:20]!r} is not one Spark writes", offset=0)
    return version, 2 + length


def _read_lineage(raw: bytes, pos: int, source: str) -> tuple[tuple[LineageItem, ...], int]:
    length = int.from_bytes(take(raw, pos, 2, source, "lineage length"), "big")
    text = decode_modified_utf8(take(raw, pos + 2, length, source, "lineage"), source=source, offset=pos + 2)
    site = JsonSite(source, "changelog lineage", pos + 2)
    items = parse_json_value(text, site)
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise site.error("the lineage must be a JSON array of objects")
    return tuple(_lineage_item(item, site) for item in items), pos + 2 + length


def _lineage_item(item: dict[str, Any], site: JsonSite) -> LineageItem:
    unique_id = item.get("checkpointUniqueId")
    if "version" not in item or not isinstance(unique_id, str):
        raise site.error("a lineage item needs 'version' and 'checkpointUniqueId'")
    return LineageItem(get_long(item, "version", site), unique_id)


def _framed_like_delta(raw: bytes, pos: int, source: str, row_checksum: bool) -> tuple[ChangelogRecord, ...]:
    """v1 records through statefiles, with error offsets moved back into ``raw``."""
    try:
        return tuple(
            ChangelogRecord("delete" if record.value is None else "put", record.key, record.value)
            for record in iter_state_records(raw[pos:], source=source, row_checksum=row_checksum, floor_values=False)
        )
    except CorruptFileError as error:
        if not pos or error.offset is None:
            raise
        raise type(error)(source, error.reason, offset=error.offset + pos) from None


def _iter_typed_records(raw: bytes, pos: int, source: str, row_checksum: bool) -> Iterator[ChangelogRecord]:
    """v2 records: a type byte before each, the EOF type byte at the end."""
    while True:
        if pos >= len(raw):
            raise TruncatedFileError(source, "the content ends without the EOF record", offset=pos)
        type_byte = raw[pos]
        if type_byte == _EOF_RECORD:
            return
        record_type = _RECORD_TYPES.get(type_byte)
        if record_type is None:
            raise CorruptFileError(source, f"unknown changelog record type {type_byte:#04x}", offset=pos)
        key, pos = _read_block(raw, pos + 1, source, "key")
        if record_type == "delete":
            if read_size(raw, pos, source, "value size") != -1:
                raise CorruptFileError(source, "a delete record's value size is not -1", offset=pos)
            yield ChangelogRecord(record_type, strip_checksum(key, source, pos) if row_checksum else key, None)
            pos += 4
            continue
        value, pos = _read_block(raw, pos, source, "value")
        if row_checksum and record_type == "put":
            value = strip_checksum(value, source, pos)
        yield ChangelogRecord(record_type, key, value)


def _read_block(raw: bytes, pos: int, source: str, what: str) -> tuple[bytes, int]:
    """An int32 length and that many bytes; a negative length is corrupt (Java cannot allocate it)."""
    size = read_size(raw, pos, source, f"{what} size")
    if size < 0:
        raise CorruptFileError(source, f"negative {what} size {size}", offset=pos)
    return take(raw, pos + 4, size, source, what), pos + 4 + size


# --- which files load version V ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RocksDBLoadChain:
    """The zip and changelogs that rebuild one version, in load order, and why it cannot load.

    ``snapshot`` None means the load starts from the empty version 0.
    """

    version: int
    unique_id: str | None
    snapshot: RocksDBVersionFile | None
    changelogs: tuple[RocksDBVersionFile, ...]
    problems: tuple[str, ...]

    @property
    def is_loadable(self) -> bool:
        return not self.problems


def resolve_load_chain(
    files: RocksDBStoreFiles, version: int, *, unique_id: str | None = None, lineage: Iterable[LineageItem] = ()
) -> RocksDBLoadChain:
    """Return the files RocksDB.load uses for ``version``, with what is missing among them.

    Format 1 (``unique_id`` None): the newest format-1 zip at or below ``version``, then every
    changelog after it. Format 2: ``<version>_<unique_id>.zip`` if present, else the newest zip
    named in ``lineage`` (read by the caller from ``<version>_<unique_id>.changelog``) and the
    changelogs after it; without such a zip the lineage must reach back to version 1.
    """
    if version < 0:
        raise ValueError(f"a state version is >= 0, not {version}")
    if unique_id is None:
        return _format1_chain(files, version)
    return _format2_chain(files, version, unique_id, tuple(lineage))


def _format1_chain(files: RocksDBStoreFiles, version: int) -> RocksDBLoadChain:
    zips = [f for f in files.zips if f.unique_id is None and f.version <= version]
    snapshot = zips[-1] if zips else None
    base = snapshot.version if snapshot else 0
    changelogs = tuple(f for f in files.changelogs if f.unique_id is None and base < f.version <= version)
    return RocksDBLoadChain(version, None, snapshot, changelogs, _missing_changelogs(base, version, changelogs))


def _missing_changelogs(base: int, version: int, changelogs: tuple[RocksDBVersionFile, ...]) -> tuple[str, ...]:
    """Name each run of versions in base+1..version without a changelog (walks the files, not the range)."""
    problems, expected = [], base + 1
    for present in [f.version for f in changelogs] + [version + 1]:
        if present > expected:
            first, last = expected, present - 1
            problems.append(
                f"missing changelog {first}.changelog"
                if first == last
                else f"missing changelogs {first}.changelog to {last}.changelog ({last - first + 1} files)"
            )
        expected = present + 1
    return tuple(problems)


def _format2_chain(
    files: RocksDBStoreFiles, version: int, unique_id: str, lineage: tuple[LineageItem, ...]
) -> RocksDBLoadChain:
    own_zip = files.find("zip", version, unique_id)
    if own_zip is not None or version == 0:
        return RocksDBLoadChain(version, unique_id, own_zip, (), ())
    name = f"{version}_{unique_id}"
    if files.find("changelog", version, unique_id) is None:
        problem = f"missing {name}.changelog (and there is no {name}.zip)"
        return RocksDBLoadChain(version, unique_id, None, (), (problem,))
    items = sorted({*lineage, LineageItem(version, unique_id)}, key=lambda item: item.version)
    zips = [z for item in items[:-1] if (z := files.find("zip", item.version, item.checkpoint_unique_id))]
    snapshot = zips[-1] if zips else None
    base = snapshot.version if snapshot else 0
    after = [item for item in items if item.version > base]
    problems = []
    if len(after) != version - base or any(item.version != base + 1 + n for n, item in enumerate(after)):
        where = f"zip {snapshot.name}" if snapshot else "version 0 (the lineage names no zip that exists)"
        problems.append(f"the lineage of {name}.changelog does not cover every version from {where} to {version}")
    changelogs = []
    for item in after:
        found = files.find("changelog", item.version, item.checkpoint_unique_id)
        if found is None:
            problems.append(f"missing {item.version}_{item.checkpoint_unique_id}.changelog")
        else:
            changelogs.append(found)
    return RocksDBLoadChain(version, unique_id, snapshot, tuple(changelogs), tuple(problems))


def state_unique_ids_by_version(
    commits: Mapping[int, CommitMetadata], *, operator: int, partition: int, store_index: int = 0
) -> dict[int, str]:
    """Map state version -> unique id of one store from commit log entries keyed by batch id.

    Batch N commits version N + 1. ``store_index`` is the store's place in the commit log's
    per-partition list (0 for the default store). Format-1 commits give nothing.
    """
    ids = {}
    for batch_id, commit in commits.items():
        partitions = (commit.state_unique_ids or {}).get(operator) or []
        stores = partitions[partition] if partition < len(partitions) else []
        if store_index < len(stores) and stores[store_index]:
            ids[batch_id + 1] = stores[store_index]
    return ids


# --- reading a store through storage -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RocksDBVersionState:
    """One version: its load chain, the SST/log files its zip lists that are absent, its row count.

    ``num_rows_source`` says how ``num_rows`` was found, or why it is None.
    """

    version: int
    chain: RocksDBLoadChain
    missing_immutable_files: tuple[str, ...]
    num_rows: int | None
    num_rows_source: str

    @property
    def is_loadable(self) -> bool:
        return self.chain.is_loadable and not self.missing_immutable_files


@dataclass(frozen=True, slots=True)
class RocksDBStoreSummary:
    """A RocksDB store directory: files, every version's state, SSTs no kept zip lists, errors."""

    operator: int
    partition: int
    store: str
    path: str
    files: RocksDBStoreFiles
    versions: tuple[RocksDBVersionState, ...]
    unreferenced_sst_files: tuple[str, ...]
    bytes_on_disk: int
    errors: tuple[str, ...]

    @property
    def latest(self) -> RocksDBVersionState | None:
        return self.versions[-1] if self.versions else None


def list_rocksdb_store_files(storage: CheckpointStorage, store: StateStoreDir) -> RocksDBStoreFiles:
    """Add the listings of the store's SSTs/ and logs/ (one LIST each, only if they exist)."""
    subdirs = {info.name for info in store.files if info.is_dir}
    listed = {
        name: [StateFileInfo(e.name, e.size) for e in storage.list_dir(f"{store.path}/{name}") if not e.is_dir]
        for name in (SST_DIR, LOG_DIR)
        if name in subdirs
    }
    return parse_rocksdb_store_files(store.files, listed.get(SST_DIR, ()), listed.get(LOG_DIR, ()))


def read_rocksdb_zip(storage: CheckpointStorage, path: str) -> RocksDBCheckpointMetadata:
    """Read the metadata of the zip at ``path`` (relative to the checkpoint root)."""
    return parse_rocksdb_zip(storage.read_bytes(path, max_bytes=MAX_ZIP_BYTES), source=path)


def read_changelog(
    storage: CheckpointStorage, path: str, *, codec: str | None, row_checksum: bool = False
) -> StateStoreChangelog:
    """Read and decode the changelog at ``path`` (relative to the checkpoint root)."""
    data = storage.read_bytes(path, max_bytes=MAX_STATE_FILE_BYTES)
    return parse_changelog(data, source=path, codec=codec, row_checksum=row_checksum)


def read_rocksdb_version(
    storage: CheckpointStorage,
    store: StateStoreDir,
    version: int,
    *,
    codec: str | None,
    row_checksum: bool = False,
    unique_id: str | None = None,
) -> RocksDBVersionState:
    """Tell how ``version`` of a store loads and, where ckptweb can know it exactly, its row count.

    ``unique_id`` (format 2) comes from the commit log (state_unique_ids_by_version); without
    it, a format-2 version takes the only unique id its files carry.
    """
    files = list_rocksdb_store_files(storage, store)
    if unique_id is None and files.checkpoint_format == 2:
        unique_id = _unique_id_of(files, version, {}, store.path)
    return _StoreReader(storage, store.path, files, codec, row_checksum).state_of(version, unique_id)


def summarize_rocksdb_store(
    storage: CheckpointStorage,
    store: StateStoreDir,
    *,
    codec: str | None,
    row_checksum: bool = False,
    unique_ids: Mapping[int, str] | None = None,
) -> RocksDBStoreSummary:
    """Read every version of a RocksDB store; a file that fails is recorded and the rest still read.

    Format 2 versions use ``unique_ids`` (from the commit log) or, failing that, the only unique
    id their files carry.
    """
    files = list_rocksdb_store_files(storage, store)
    reader = _StoreReader(storage, store.path, files, codec, row_checksum)
    states, errors = [], []
    for version in files.versions:
        try:
            states.append(reader.state_of(version, _unique_id_of(files, version, unique_ids or {}, store.path)))
        except CheckpointError as error:
            errors.append(str(error))
    referenced, zip_errors = reader.referenced_immutable_files()
    unreferenced = tuple(f.name for f in files.sst_files if f.name not in referenced)
    sizes = sum(f.size for f in store.files if not f.is_dir) + sum(f.size for f in files.sst_files + files.log_files)
    return RocksDBStoreSummary(
        store.operator,
        store.partition,
        store.store,
        store.path,
        files,
        tuple(states),
        unreferenced,
        sizes,
        tuple(dict.fromkeys(errors + zip_errors)),
    )


def _unique_id_of(files: RocksDBStoreFiles, version: int, unique_ids: Mapping[int, str], path: str) -> str | None:
    if version in unique_ids:
        return unique_ids[version]
    candidates = files.unique_ids_of(version)
    if len(candidates) > 1:
        reason = f"{len(candidates)} unique ids for version {version}: the commit log must name one"
        raise CheckpointError(f"{path}/{version}_*", reason)
    return candidates[0] if candidates else None


class _StoreReader:
    """Reads one store's zips and changelogs through storage, each file at most once."""

    def __init__(
        self, storage: CheckpointStorage, path: str, files: RocksDBStoreFiles, codec: str | None, row_checksum: bool
    ) -> None:
        self.storage, self.path, self.files = storage, path, files
        self.codec, self.row_checksum = codec, row_checksum
        self._metadata: dict[str, RocksDBCheckpointMetadata] = {}
        self._changelogs: dict[str, StateStoreChangelog] = {}
        self._keys_after: dict[str, frozenset[bytes]] = {}  # changelog name -> keys replayed from version 0

    def metadata(self, zip_file: RocksDBVersionFile) -> RocksDBCheckpointMetadata:
        if zip_file.name not in self._metadata:
            self._metadata[zip_file.name] = read_rocksdb_zip(self.storage, f"{self.path}/{zip_file.name}")
        return self._metadata[zip_file.name]

    def changelog(self, changelog: RocksDBVersionFile) -> StateStoreChangelog:
        if changelog.name not in self._changelogs:
            self._changelogs[changelog.name] = read_changelog(
                self.storage, f"{self.path}/{changelog.name}", codec=self.codec, row_checksum=self.row_checksum
            )
        return self._changelogs[changelog.name]

    def state_of(self, version: int, unique_id: str | None) -> RocksDBVersionState:
        lineage: tuple[LineageItem, ...] = ()
        own_changelog = self.files.find("changelog", version, unique_id) if unique_id else None
        if own_changelog and self.files.find("zip", version, unique_id) is None:
            lineage = self.changelog(own_changelog).lineage or ()
        chain = resolve_load_chain(self.files, version, unique_id=unique_id, lineage=lineage)
        missing = self._missing_immutable_files(chain.snapshot)
        return RocksDBVersionState(version, chain, missing, *self._count_rows(chain, missing))

    def _missing_immutable_files(self, snapshot: RocksDBVersionFile | None) -> tuple[str, ...]:
        """SSTs/ and logs/ files the zip lists that are absent or of another size than listed."""
        if snapshot is None:
            return ()
        metadata = self.metadata(snapshot)
        missing = []
        kinds = (
            (SST_DIR, metadata.sst_files, self.files.sst_files),
            (LOG_DIR, metadata.log_files, self.files.log_files),
        )
        for subdir, listed, present in kinds:
            sizes = {info.name: info.size for info in present}
            missing += [f"{subdir}/{f.dfs_file_name}" for f in listed if sizes.get(f.dfs_file_name) != f.size_bytes]
        return tuple(missing)

    def _count_rows(self, chain: RocksDBLoadChain, missing: tuple[str, ...]) -> tuple[int | None, str]:
        if not chain.is_loadable:
            return None, "cannot be loaded: " + "; ".join(chain.problems)
        if missing:
            return None, f"cannot be loaded: {chain.snapshot.name} lists {len(missing)} absent or resized SST/log files"
        if chain.snapshot is not None:
            return self._rows_of_zip(chain)
        keys = self._replay_keys(chain.changelogs)
        if keys is None:
            return None, "the changelogs have column families (v2/v4): ckptweb does not count rows per column family"
        return len(keys), f"replay of {len(chain.changelogs)} changelogs from version 0"

    def _rows_of_zip(self, chain: RocksDBLoadChain) -> tuple[int | None, str]:
        num_keys = self.metadata(chain.snapshot).num_keys
        if chain.changelogs:
            return None, (
                f"{chain.snapshot.name} + {len(chain.changelogs)} changelog(s): whether a put adds a key or "
                "overwrites one is only known from the SST files (rocksdbrows reads them)"
            )
        if num_keys < 0:
            return (
                None,
                f"{chain.snapshot.name} has numKeys {num_keys}: row tracking was off (rocksdbrows counts its keys)",
            )
        return num_keys, f"numKeys of {chain.snapshot.name}"

    def _replay_keys(self, changelogs: tuple[RocksDBVersionFile, ...]) -> set[bytes] | None:
        """The keys after replaying ``changelogs`` from the empty version 0, or None with column families."""
        start, keys = 0, set()
        for index in range(len(changelogs) - 1, -1, -1):
            if changelogs[index].name in self._keys_after:
                start, keys = index + 1, set(self._keys_after[changelogs[index].name])
                break
        for changelog_file in changelogs[start:]:
            changelog = self.changelog(changelog_file)
            if changelog.has_column_families:
                return None
            for record in changelog.records:
                (keys.discard if record.value is None else keys.add)(record.key)
            self._keys_after[changelog_file.name] = frozenset(keys)
        return keys

    def referenced_immutable_files(self) -> tuple[set[str], list[str]]:
        """The SST/log names listed by any zip of the store, and the errors of zips that failed."""
        names, errors = set(), []
        for zip_file in self.files.zips:
            try:
                metadata = self.metadata(zip_file)
            except CheckpointError as error:
                errors.append(str(error))
                continue
            names.update(f.dfs_file_name for f in metadata.sst_files + metadata.log_files)
        return names, errors
