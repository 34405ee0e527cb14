"""A RocksDB version zip and the RocksDBCheckpointMetadata inside it.

``<v>.zip`` (java.util.zip) holds RocksDB's CURRENT, MANIFEST-*, OPTIONS-* and ``metadata``: the
line ``v1`` then one JSON object (RocksDBCheckpointMetadata) listing the SST and log files of the
version and its ``numKeys`` (-1 when row tracking is off).

Parsers of bytes, with the bounds and the errors a damaged zip may raise, shared by the summary,
the row reader (rocksdbinstance.py) and the cleanup.
"""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

from .errors import CorruptFileError, UnsupportedVersionError
from .logfile import JsonSite, get_long, get_object, parse_json_object
from .stateschema import decode_modified_utf8

ZIP_METADATA_ENTRY = "metadata"
CHECKPOINT_METADATA_VERSION = 1  # RocksDBCheckpointMetadata.VERSION, 3.2 to 4.3
# A zip holds RocksDB's small bookkeeping files, not data (that is in SSTs/); the bounds only stop
# a damaged or hostile file from exhausting a worker's memory.
MAX_ZIP_BYTES = 256 * 1024 * 1024
MAX_ZIP_METADATA_BYTES = 64 * 1024 * 1024
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
