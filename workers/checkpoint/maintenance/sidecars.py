"""Files that describe another file and must follow it: Hadoop ``.crc`` and Spark's checksum sidecar.

* ``.<name>.crc``: Hadoop's ChecksumFileSystem CRC file on local filesystems: ``crc\\0``, a
  big-endian int32 bytes-per-checksum (512), then a big-endian CRC-32 of each 512-byte chunk.
  Spark does not verify it, but Hadoop's FileSystem readers do, so a rewritten file needs a new
  one and a deleted file takes its own with it.
* ``<name>.crc`` (no dot): Spark 4.1+'s checkpoint-file checksum (ChecksumCheckpointFileManager),
  JSON, which Spark verifies; its own Hadoop CRC is ``.<name>.crc.crc``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Collection

HADOOP_BYTES_PER_CHECKSUM = 512
_HADOOP_CRC_HEADER = b"crc\0" + struct.pack(">i", HADOOP_BYTES_PER_CHECKSUM)


def hadoop_crc_name(name: str) -> str:
    """The Hadoop checksum file of ``name`` (a base name)."""
    return f".{name}.crc"


def hadoop_crc_bytes(data: bytes) -> bytes:
    """The content Hadoop's LocalFileSystem writes to ``.<name>.crc`` for a file holding ``data``."""
    step = HADOOP_BYTES_PER_CHECKSUM
    sums = (zlib.crc32(data[start : start + step]) for start in range(0, len(data), step))
    return _HADOOP_CRC_HEADER + b"".join(struct.pack(">I", value) for value in sums)


def sidecars_of(name: str, names_in_directory: Collection[str]) -> tuple[str, ...]:
    """The sidecar files of ``name`` present in its directory, in the order to delete them.

    Spark's checksum sidecar goes first (as ChecksumCheckpointFileManager.delete does: a file
    without its sidecar is read unverified, a sidecar without its file is an orphan Spark
    cleans up), then the Hadoop CRCs.
    """
    candidates = (f"{name}.crc", hadoop_crc_name(f"{name}.crc"), hadoop_crc_name(name))
    return tuple(candidate for candidate in candidates if candidate in names_in_directory)


def directory_uses_hadoop_crc(names_in_directory: Collection[str]) -> bool:
    """Tell whether files in this directory carry Hadoop CRCs (a local filesystem written by Spark)."""
    return any(name.startswith(".") and name.endswith(".crc") for name in names_in_directory)
