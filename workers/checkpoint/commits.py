"""The commit log ``commits/<N>``: batch N finished (CommitLog, CommitMetadata).

Layout: the version line, then one JSON object, no trailing newline. If line 2 is missing,
Spark reads it as ``{}`` (Spark 2.3-era files hold only ``v1``).

* v1 (Spark 3.x, 4.x default): ``{"nextBatchWatermarkMs":1704067192000}``
* v2 (Spark 4.0+, checkpointFormatVersion 2; CommitMetadataV2): adds
  ``"stateUniqueIds":{"<operatorId>":[[ids of partition 0], [ids of partition 1], ...]}``
* v3 (Spark 4.2+, sink evolution; CommitMetadataV3): adds
  ``"sinkMetadataMap":{"<sinkName>":{"sinkName","commitOffset","providerName","isActive"}}``

``nextBatchWatermarkMs`` defaults to 0. Fields a version does not define are ignored, as json4s
does when it reads the case class of that version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .logfile import JsonSite, get_long, get_object, get_object_map, parse_json_object, parse_log_file

COMMIT_LOG_MAX_VERSION = 3

# Operator ids are Java longs written as JSON object keys.
_OPERATOR_ID = re.compile(r"0|[1-9][0-9]{0,18}")


@dataclass(frozen=True, slots=True)
class CommitMetadata:
    """One commit log file (CommitMetadata / CommitMetadataV2 / CommitMetadataV3).

    ``state_unique_ids`` maps operator id to, per partition, the unique ids of its state store
    files (v2 and v3, None when absent). ``sink_metadata`` maps sink name to its
    SinkMetadataInfo object (v3 only, else None).
    """

    version: int
    next_batch_watermark_ms: int
    state_unique_ids: dict[int, list[list[str | None]]] | None
    sink_metadata: dict[str, dict[str, Any]] | None


def parse_commit(data: bytes, *, source: str) -> CommitMetadata:
    """Parse a ``commits/<N>`` file.

    Raises a CorruptFileError subclass for an empty file or invalid metadata, and
    UnsupportedVersionError above v3.
    """
    log = parse_log_file(data, source=source, max_version=COMMIT_LOG_MAX_VERSION)
    text = log.lines[0] if log.lines else "{}"  # CommitLog reads a missing line 2 as EMPTY_JSON
    site = JsonSite(source, "line 2 (commit metadata)", log.offset_of(0))
    fields = parse_json_object(text, site)
    return CommitMetadata(
        version=log.version,
        next_batch_watermark_ms=get_long(fields, "nextBatchWatermarkMs", site),
        state_unique_ids=_parse_state_unique_ids(fields, site) if log.version >= 2 else None,
        # CommitMetadataV3 only; its default is an empty map.
        sink_metadata=get_object_map(fields, "sinkMetadataMap", site) if log.version >= 3 else None,
    )


def _parse_state_unique_ids(fields: dict[str, Any], site: JsonSite) -> dict[int, list[list[str | None]]] | None:
    """Return ``stateUniqueIds`` (v2 and v3) with its shape checked; None when absent."""
    ids = get_object(fields, "stateUniqueIds", site)
    if ids is None:
        return None
    result = {}
    for operator_id, partitions in ids.items():
        if not _OPERATOR_ID.fullmatch(operator_id) or not _is_list_of_id_lists(partitions):
            raise site.error(f"stateUniqueIds of operator {operator_id[:20]!r} is not a list of id lists")
        result[int(operator_id)] = partitions
    return result


def _is_list_of_id_lists(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(ids, list) and all(uid is None or isinstance(uid, str) for uid in ids) for ids in value
    )
