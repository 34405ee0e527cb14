"""The files of a RocksDB state store directory, told apart by name: version zips and changelogs
of both checkpoint formats, and the shared SST and log files.

A RocksDB store directory ``state/<op>/<part>[/<store>]/`` (RocksDBFileManager) holds::

    <v>.zip, <v>.changelog                checkpoint format 1
    <v>_<uuid>.zip, <v>_<uuid>.changelog  checkpoint format 2 (Spark 4.0+): the uuid is the state
                                          unique id that the commit log records for version v
    SSTs/<n>-<uuid>.sst                   RocksDB data files, shared by the zips that list them
    logs/<n>-<uuid>.log                   archived write-ahead logs, when there are any

Pure over a listing, so the inventory and the integrity checks classify a store without a read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from .stateinventory import StateFileInfo

SST_DIR = "SSTs"
LOG_DIR = "logs"
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_VERSION_FILE = re.compile(rf"(0|[1-9][0-9]{{0,18}})(?:_({_UUID}))?\.(zip|changelog)")


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
