"""The RocksDB instance of one ``<v>.zip``, rebuilt in a local directory and read with rocksdict.

RocksDBFileManager.loadCheckpointFromDfs rebuilds a version the same way: it unzips the zip's
RocksDB files (CURRENT, MANIFEST-*, OPTIONS-*, an empty write-ahead log) into a directory and
copies every ``SSTs/<dfsSstFileName>`` the zip's metadata lists there as ``<localFileName>``.
Here the directory is a temporary one, the copies go through CheckpointStorage.copy_to_local,
and the instance is opened read-only (rocksdict, a binding of RocksDB itself: it reads every
SST format version Spark's RocksDB JNI writes, both checksums and all compressions). Archived
logs (``logs/``) are not copied: Spark flushes before it checkpoints (its WAL is disabled), so
the SSTs hold the version's data, and RocksDB does not replay archived logs on open.

Keys and values are the bytes Spark wrote: no column families, a key is a version byte 0x00
and the key's UnsafeRow; with virtual column families (4.x) a 2-byte column-family id comes
first. Iteration is in RocksDB's bytewise key order.

Errors: rocksdict raises plain exceptions carrying RocksDB's status text ("Corruption: block
checksum mismatch: ... in /tmp/.../000012.sst offset 0 size 171"). They become CorruptFileError
naming the SST on storage when the text names a local SST, the zip otherwise. Rdict's keys()
and items() iterators end quietly at an error, so an iteration is checked when it ends: a fresh
iterator steps past the last key seen, and its status() raises what stopped the first one.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from rocksdict import AccessType, Options, Rdict

from .errors import CheckpointError, CorruptFileError
from .rocksdbfiles import SST_DIR
from .rocksdbzip import MAX_ZIP_BYTES, ZIP_ERRORS, ZIP_METADATA_ENTRY, RocksDBCheckpointMetadata
from .storage.checkpointstorage import CheckpointStorage

# What the RocksDB files of a zip may add up to once inflated (they are a few KB: bookkeeping).
MAX_ZIP_ENTRIES_BYTES = 256 * 1024 * 1024
# Keys asked of RocksDB in one multi-get.
LOOKUP_BATCH_KEYS = 4096
# Names RocksDB gives its own files (CURRENT, MANIFEST-000005, OPTIONS-000007, 000004.log, ...).
_ZIP_ENTRY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,254}")
_STATUS_OFFSET = re.compile(r"\boffset (\d+)")


class RocksDBInstance:
    """A version's RocksDB, opened read-only; every read raises CheckpointError naming the file."""

    def __init__(self, db: Rdict, files: _LocalFiles) -> None:
        self._db, self._files = db, files
        self.zip_path = files.zip_path

    def iter_keys(self, start: bytes | None = None) -> Iterator[bytes]:
        """Every key from ``start`` (or the first) on, in order."""
        last = None
        with self._translated():
            for last in self._db.keys(from_key=start):
                yield last
            self._check_iteration_end(start, last)

    def iter_items(self) -> Iterator[tuple[bytes, bytes]]:
        """Every key and value, in key order."""
        last = None
        with self._translated():
            for last, value in self._db.items():
                yield last, value
            self._check_iteration_end(None, last)

    def find_present(self, keys: Sequence[bytes]) -> list[bool]:
        """Tell for each key whether the instance holds it (multi-gets of LOOKUP_BATCH_KEYS)."""
        present: list[bool] = []
        with self._translated():
            for start in range(0, len(keys), LOOKUP_BATCH_KEYS):
                values = self._db[list(keys[start : start + LOOKUP_BATCH_KEYS])]
                present.extend(value is not None for value in values)
        return present

    def _check_iteration_end(self, start: bytes | None, last: bytes | None) -> None:
        """Raise what ended an iteration early: step past ``last`` again and read the status."""
        iterator = self._db.iter()
        if last is not None:
            iterator.seek(last)
            if iterator.valid():
                iterator.next()
        elif start is not None:
            iterator.seek(start)
        else:
            iterator.seek_to_first()
        if iterator.valid():
            raise CorruptFileError(self.zip_path, "RocksDB stopped an iteration before its last key")
        iterator.status()

    @contextlib.contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except CheckpointError:
            raise
        except Exception as exc:  # noqa: BLE001 - rocksdict raises bare Exception with RocksDB's status
            raise self._files.error_of(exc) from None


@dataclass(frozen=True, slots=True)
class _LocalFiles:
    """Where a rebuilt instance lives, and which file on storage each local SST came from."""

    directory: str
    zip_path: str
    sst_paths: dict[str, str]

    def error_of(self, exc: BaseException) -> CorruptFileError:
        """RocksDB's status as an error naming the SST on storage it is about, else the zip."""
        text = str(exc).replace(self.directory + os.sep, "")
        for local_name, path in self.sst_paths.items():
            if local_name in text:
                offset = _STATUS_OFFSET.search(text)
                return CorruptFileError(
                    path, f"RocksDB cannot read it: {text}", offset=int(offset[1]) if offset else None
                )
        # RocksDB names no file for some damage it finds while opening (a damaged properties
        # block of an SST reads "properties unsorted ... MANIFEST may be corrupted"): name them all.
        suspects = ", ".join(
            path.rsplit("/", 2)[-2] + "/" + path.rsplit("/", 1)[-1] for path in self.sst_paths.values()
        )
        where = f" (the damaged file is its MANIFEST or one of {suspects})" if suspects else ""
        return CorruptFileError(self.zip_path, f"RocksDB cannot read this version{where}: {text}")


@contextlib.contextmanager
def open_rocksdb_instance(
    storage: CheckpointStorage, store_path: str, zip_name: str, metadata: RocksDBCheckpointMetadata
) -> Iterator[RocksDBInstance]:
    """Rebuild the version of ``<store_path>/<zip_name>`` in a temporary directory and open it.

    The directory is removed when the block ends. Raises CorruptFileError for a zip whose
    RocksDB files cannot be unpacked, an SST of another size than the metadata lists, or an
    instance RocksDB refuses to open; MissingFileError for an absent SST.
    """
    zip_path = f"{store_path}/{zip_name}"
    with tempfile.TemporaryDirectory(prefix="ckptweb-rocksdb-") as directory:
        _unpack_rocksdb_files(storage.read_bytes(zip_path, max_bytes=MAX_ZIP_BYTES), zip_path, directory)
        files = _LocalFiles(directory, zip_path, _copy_sst_files(storage, store_path, zip_path, metadata, directory))
        try:
            db = Rdict(directory, Options(raw_mode=True), access_type=AccessType.read_only(False))
        except Exception as exc:  # noqa: BLE001 - see RocksDBInstance._translated
            raise files.error_of(exc) from None
        try:
            yield RocksDBInstance(db, files)
        finally:
            db.close()


def _unpack_rocksdb_files(data: bytes, zip_path: str, directory: str) -> None:
    """Write every zip entry but ``metadata`` into ``directory`` (names checked, sizes bounded)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            entries = [info for info in archive.infolist() if info.filename != ZIP_METADATA_ENTRY]
            _check_entries(entries, zip_path)
            for info in entries:
                with archive.open(info) as source, open(os.path.join(directory, info.filename), "xb") as target:
                    shutil.copyfileobj(source, target)
    except CheckpointError:
        raise
    except ZIP_ERRORS as exc:
        raise CorruptFileError(zip_path, f"not a readable zip file: {exc}") from None


def _check_entries(entries: Sequence[zipfile.ZipInfo], zip_path: str) -> None:
    total = 0
    for info in entries:
        if not _ZIP_ENTRY_NAME.fullmatch(info.filename):
            raise CorruptFileError(zip_path, f"zip entry {info.filename[:80]!r} is not a RocksDB file name")
        total += info.file_size
    if total > MAX_ZIP_ENTRIES_BYTES:
        raise CorruptFileError(
            zip_path, f"zip entries declare {total} bytes, over the limit of {MAX_ZIP_ENTRIES_BYTES}"
        )


def _copy_sst_files(
    storage: CheckpointStorage, store_path: str, zip_path: str, metadata: RocksDBCheckpointMetadata, directory: str
) -> dict[str, str]:
    """Copy the zip's SSTs under their local names; return local name -> path on storage."""
    sst_paths = {}
    for sst in metadata.sst_files:
        path = f"{store_path}/{SST_DIR}/{sst.dfs_file_name}"
        if not _ZIP_ENTRY_NAME.fullmatch(sst.local_file_name) or sst.local_file_name in os.listdir(directory):
            raise CorruptFileError(
                zip_path, f"zip entry 'metadata': bad or repeated SST name {sst.local_file_name[:80]!r}"
            )
        copied = storage.copy_to_local(path, os.path.join(directory, sst.local_file_name), max_bytes=sst.size_bytes)
        if copied != sst.size_bytes:
            raise CorruptFileError(path, f"{copied} bytes, but the zip lists {sst.size_bytes}", offset=copied)
        sst_paths[sst.local_file_name] = path
    return sst_paths
