"""The offset log ``offsets/<N>``: what batch N reads from each source (OffsetSeqLog).

Version 1 (every Spark 2.x, 3.x and 4.x by default; OffsetSeq)::

    v1
    {"batchWatermarkMs":0,"batchTimestampMs":1480981499528,"conf":{...}}   <- or empty: none
    {"logOffset":345}                                                      <- one line per source
    -                                                                      <- source with no offset

Version 2 (Spark 4.2+, opt-in; OffsetMap with OffsetSeqMetadataV2): the metadata line is
required and adds ``sourceMetadataInfo``; each source line is ``<sourceId>:<offset json>``,
split at the first colon, ``-`` after the colon meaning no offset.

Metadata fields (OffsetSeqMetadata): ``batchWatermarkMs`` and ``batchTimestampMs`` are Java
longs defaulting to 0, ``conf`` maps SQL conf keys to string values (absent before Spark 2.2).
Offsets are kept as the exact strings written (Spark's SerializedOffset); only each source
knows how to read its own offset JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import CheckpointError, CorruptFileError, TruncatedFileError
from .logfile import (
    JsonSite,
    LogFile,
    get_long,
    get_object,
    get_object_map,
    parse_json_object,
    parse_json_value,
    parse_log_file,
)

OFFSET_LOG_MAX_VERSION = 2
SERIALIZED_VOID_OFFSET = "-"


@dataclass(frozen=True, slots=True)
class OffsetSeqMetadata:
    """Line 2 of an offset log file (OffsetSeqMetadata, or OffsetSeqMetadataV2 in v2 files).

    ``source_metadata_info`` maps source id to ``{"sourceId", "providerName", "apiVersion"}``
    in v2 files and is None in v1 files. ``raw`` is the JSON text of the line as written.
    """

    batch_watermark_ms: int
    batch_timestamp_ms: int
    conf: dict[str, str]
    source_metadata_info: dict[str, dict[str, Any]] | None
    raw: str


@dataclass(frozen=True, slots=True)
class OffsetSeq:
    """One offset log file: an offset string (or None for ``-``) per source.

    ``source_ids`` is None in v1 files, where sources are identified by position; in v2 files it
    holds the id of each entry of ``offsets``, in file order.
    """

    version: int
    metadata: OffsetSeqMetadata | None
    offsets: tuple[str | None, ...]
    source_ids: tuple[str, ...] | None


def parse_offset_seq(data: bytes, *, source: str) -> OffsetSeq:
    """Parse an ``offsets/<N>`` file.

    Raises a CorruptFileError subclass when the file is empty, truncated before its metadata
    line, or holds invalid metadata; UnsupportedVersionError above v2.
    """
    log = parse_log_file(data, source=source, max_version=OFFSET_LOG_MAX_VERSION)
    if not log.lines:
        # Spark calls lines.next() for the metadata line and fails the same way.
        reason = "the file ends before the metadata line (line 2)"
        raise TruncatedFileError(source, reason, offset=len(data))
    metadata = _parse_metadata(log, source=source)
    if log.version == 1:
        return OffsetSeq(1, metadata, tuple(_parse_offset(line) for line in log.lines[1:]), None)
    if metadata is None:
        raise CorruptFileError(source, "line 2: an offset log v2 file requires metadata", offset=log.offset_of(0))
    return _parse_offset_map(log, metadata, source=source)


def _parse_offset(text: str) -> str | None:
    return None if text == SERIALIZED_VOID_OFFSET else text


def _parse_metadata(log: LogFile, *, source: str) -> OffsetSeqMetadata | None:
    """Parse line 2; an empty line means "no metadata" (Spark 2.0 files)."""
    line = log.lines[0]
    raw = line.strip()  # Spark trims this line before parsing it
    if not raw:
        return None
    start, leading = log.offset_of(0), line[: len(line) - len(line.lstrip())]
    offset = None if start is None else start + len(leading.encode("utf-8"))
    site = JsonSite(source, "line 2 (metadata)", offset)
    fields = parse_json_object(raw, site)
    return OffsetSeqMetadata(
        batch_watermark_ms=get_long(fields, "batchWatermarkMs", site),
        batch_timestamp_ms=get_long(fields, "batchTimestampMs", site),
        conf=_parse_conf(fields, site),
        # OffsetSeqMetadataV2 only; its default is an empty map.
        source_metadata_info=None if log.version == 1 else get_object_map(fields, "sourceMetadataInfo", site),
        raw=raw,
    )


def _parse_conf(fields: dict[str, Any], site: JsonSite) -> dict[str, str]:
    conf = get_object(fields, "conf", site) or {}
    for key, value in conf.items():
        if not isinstance(value, str):
            raise site.error(f"conf value of {key[:80]!r} must be a string")
    return conf


def _parse_offset_map(log: LogFile, metadata: OffsetSeqMetadata, *, source: str) -> OffsetSeq:
    """Parse the ``sourceId:offset`` lines of a v2 file, keeping their order."""
    source_ids, offsets = [], []
    for index, line in enumerate(log.lines[1:], start=1):
        source_id, colon, offset = line.partition(":")
        if not colon:
            reason = f"line {index + 2}: expected 'sourceId:offset', found {line[:40]!r}"
            raise CorruptFileError(source, reason, offset=log.offset_of(index))
        source_ids.append(source_id)
        offsets.append(_parse_offset(offset))
    return OffsetSeq(log.version, metadata, tuple(offsets), tuple(source_ids))


def offset_as_json(offset: str | None) -> Any:
    """Return an offset as JSON when it is JSON (as StreamingQueryProgress does), else as written."""
    if offset is None:
        return None
    try:
        return parse_json_value(offset, JsonSite("offset", "offset"))
    except CheckpointError:
        return offset
