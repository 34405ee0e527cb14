"""File-name rules of a checkpoint's metadata logs (pure, no I/O).

In an HDFSMetadataLog directory (``offsets/``, ``commits/``, ``sources/<i>/``,
``_spark_metadata/``) the file of batch N is named ``N`` in decimal (``batchId.toString``, no
padding). Compactible logs (CompactibleFileStreamLog: file source and file sink logs) name a
compaction batch ``N.compact``. Everything else in those directories is not a batch file:

* ``.N.crc`` -- Hadoop ChecksumFileSystem checksums next to files written on a local FS;
* ``.N.<uuid>[.TID<n>].tmp`` -- in-flight or leftover temporary files of
  CheckpointFileManager.createAtomic;
* ``N.crc`` -- Spark 4.1+ ChecksumCheckpointFileManager sidecars (state files only).
"""

from __future__ import annotations

import re

# Paths relative to the checkpoint root (StreamExecution).
METADATA_FILE = "metadata"
OFFSETS_DIR = "offsets"
COMMITS_DIR = "commits"

COMPACT_FILE_SUFFIX = ".compact"
# Where maintenance runs back up what they delete or overwrite (maintenance/backup.py); Spark
# never reads it, and the checkpoint's walkers do not descend into it.
BACKUP_DIR = "_ckptweb_backup"

# The largest batch id Spark can write: batch ids are Java longs.
MAX_BATCH_ID = 2**63 - 1

# Canonical decimal only. Java's Long.parseLong would also take "+7" or "007", but Spark never
# writes such names, and Spark would look for batch 7 under "7", not under "007".
_MAX_BATCH_ID_DIGITS = 19
_TEMPORARY_FILE = re.compile(
    r"\..+\.[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"(\.TID[0-9]+)?\.tmp"
)


def parse_batch_id(name: str, compactible: bool = False) -> int | None:
    """Return the batch id a metadata-log file name stands for, or None if it is no batch file.

    ``N.compact`` counts only when ``compactible`` is true (file source and sink logs).
    """
    if compactible and name.endswith(COMPACT_FILE_SUFFIX):
        name = name[: -len(COMPACT_FILE_SUFFIX)]
    # String tests rather than a pattern: a listing of a long log asks this for every name.
    if not (name.isascii() and name.isdigit()) or len(name) > _MAX_BATCH_ID_DIGITS or (name[0] == "0" and name != "0"):
        return None
    batch_id = int(name)
    return batch_id if batch_id <= MAX_BATCH_ID else None


def is_temporary_file(name: str) -> bool:
    """Tell whether ``name`` is a temporary file of an atomic write, ``.<name>.<uuid>[.TID<n>].tmp``.

    Spark deletes these when a write fails; one left behind after a crash is garbage.
    """
    return _TEMPORARY_FILE.fullmatch(name) is not None
