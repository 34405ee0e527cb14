"""RocksDB state store changelogs v1-v4: the version sniffed, the lineage, the records.

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

Parsers of bytes only: the summary, the state keys and the row reader all replay changelogs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .errors import CorruptFileError, TruncatedFileError, UnsupportedVersionError
from .logfile import JsonSite, get_long, parse_json_value
from .statecodec import MAX_STATE_FILE_BYTES, decompress_state_file
from .statefiles import iter_state_records, read_size, strip_checksum, take
from .stateschema import decode_modified_utf8

CHANGELOG_MAX_VERSION = 4

# RecordType.getRecordTypeAsByte (Spark 4.3 adds delete range).
_EOF_RECORD = 0x00
_RECORD_TYPES = {0x01: "put", 0x10: "delete", 0x11: "merge", 0x20: "delete_range"}
_JAVA_SHORT = re.compile(r"[+-]?[0-9]{1,5}")


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
