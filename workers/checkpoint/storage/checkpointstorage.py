"""CheckpointStorage: one checkpoint root on an fsspec filesystem, the library's only door to storage.

It lists, reads (ranges, many files at once), copies, writes atomically and deletes below its root,
counts every call (StorageCalls), and turns backend errors into the library's, naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import fsspec
import fsspec.asyn

from ..errors import CheckpointError, CorruptFileError, MissingFileError, PathNotAllowedError, StorageError
from ..fileinfo import FileInfo
from ..localdirs import HeldDirectories, open_checked
from .entries import BACKEND_ERRORS, file_info, mtime_seconds, storage_error
from .localfiles import fsync_directory, list_local
from .locations import LOCAL_SCHEMES, check_allowed, parse_location

# Metadata-log files are a few hundred bytes; the budget only stops a bogus huge file from
# exhausting memory. Callers reading big files (state snapshots) pass their own max_bytes.
MAX_LOG_FILE_BYTES = 64 * 1024 * 1024
# Local reads go in pieces of this size (see CheckpointStorage._read_local).
LOCAL_READ_CHUNK_BYTES = 4 * 1024 * 1024
# Reads read_many keeps in flight on an object store. botocore's connection pool must hold as many
# (workers.storage_options sets max_pool_connections to this).
REMOTE_READS_IN_FLIGHT = 16
# The first read of a local file: a log file of a batch is about 1 KB.
LOCAL_FIRST_READ_BYTES = 8 * 1024


@dataclass(slots=True)
class StorageCalls:
    """Counters of the calls a ``CheckpointStorage`` made, for logs, metrics and tests."""

    list: int = 0
    info: int = 0
    read: int = 0
    bytes_read: int = 0
    write: int = 0
    bytes_written: int = 0
    delete: int = 0

    def as_dict(self) -> dict[str, int]:
        """Return the counters as a plain dict."""
        return asdict(self)


def _real_local_roots(allowed_roots: Sequence[str] | None) -> tuple[str, ...] | None:
    """The local roots with symlinks resolved (None: every place is allowed).

    A file below the checkpoint may itself be a link out of them, which reads check. Each ends
    with one separator, so a prefix test is a containment test (root /a does not hold /ab); it is
    called once per file read, where os.path.commonpath cost ten times more.
    """
    if allowed_roots is None:
        return None
    return tuple(
        os.path.realpath(root.path).rstrip(os.sep) + os.sep
        for root in map(parse_location, allowed_roots)
        if root.protocol == "file"
    )


def _local_read_size(position: int, size: int | None, end: int | None) -> int:
    """How much the next read of a local file asks for, at ``position`` of a file of ``size`` (None:
    not asked yet), reading up to ``end`` (None: its end)."""
    if size is None:
        # Most log files end within a first small read, without asking their size.
        wanted = LOCAL_FIRST_READ_BYTES
    else:
        # Then the size the file has now, plus one byte to see its end in the same
        # call (a full chunk per small file cost 20 us).
        wanted = min(LOCAL_READ_CHUNK_BYTES, size - position + 1) if position < size else LOCAL_READ_CHUNK_BYTES
    return wanted if end is None else min(wanted, end - position)


class CheckpointStorage:
    """One checkpoint root on an fsspec filesystem; the library's only door to storage.

    ``url`` is the normalised URL of the root. Relative paths below it use '/' and may not
    contain empty, '.' or '..' segments.
    """

    def __init__(
        self,
        url: str,
        *,
        allowed_roots: Sequence[str] | None = None,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.url = check_allowed(url, allowed_roots)
        self.calls = StorageCalls()
        self._real_roots = _real_local_roots(allowed_roots)
        try:
            self._fs, root = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        except (ImportError, ValueError) as exc:
            # An unknown scheme, or a backend such as s3fs that is not installed.
            raise StorageError(self.url, f"cannot open this filesystem: {exc}") from exc
        self._root = root if root == "/" else root.rstrip("/")
        protocols = self._fs.protocol if isinstance(self._fs.protocol, tuple) else (self._fs.protocol,)
        self._is_local = bool(LOCAL_SCHEMES & set(protocols))
        self._held_directories: HeldDirectories | None = None

    def __repr__(self) -> str:
        return f"CheckpointStorage({self.url!r})"

    def list_dir(self, relpath: str = "") -> list[FileInfo]:
        """List a directory, sorted by name; return [] when it does not exist."""
        path = self._path(relpath)
        self.calls.list += 1
        # fsspec caches instances and (for object stores) listings across calls; a dashboard
        # that polls must see new batches, so drop the cached listing first.
        self._fs.invalidate_cache(path)
        if self._is_local:
            return list_local(path, relpath, self._check_opened_file)
        try:
            entries = self._fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        except BACKEND_ERRORS as exc:
            raise storage_error(relpath or ".", "cannot list the directory", exc) from exc
        # Some backends list the directory itself, or the file when `path` is a file.
        infos = [file_info(entry) for entry in entries if entry["name"].rstrip("/") != path]
        return sorted(infos, key=lambda info: info.name)

    def read_bytes(self, relpath: str, *, max_bytes: int | None = MAX_LOG_FILE_BYTES) -> bytes:
        """Return the whole content of a file.

        Raises MissingFileError when it does not exist, StorageError when it cannot be read,
        and CorruptFileError when it is larger than ``max_bytes`` (None: no limit).
        """
        return self.read_range(relpath, 0, max_bytes=max_bytes)

    def read_range(self, relpath: str, start: int, *, max_bytes: int | None = MAX_LOG_FILE_BYTES) -> bytes:
        """Return the content of a file from byte ``start`` to its end (a ranged GET on object stores).

        For a file that grows (an event log being written), only the new bytes travel. Errors
        as read_bytes; CorruptFileError when more than ``max_bytes`` follow ``start``.
        """
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        path = self._path(relpath)
        self.calls.read += 1
        # Ask for one byte more than allowed: a file that returns it is too large, and no
        # more than the budget is ever held in memory.
        end = None if max_bytes is None else start + max_bytes + 1
        try:
            content = (
                self._read_local(path, relpath, start, end)
                if self._is_local
                else self._fs.cat_file(path, start=start, end=end)
            )
        except BACKEND_ERRORS as exc:
            content = b"" if self._asked_past_the_end(path, start, exc) else exc
        result = self._checked_content(relpath, content, max_bytes)
        if isinstance(result, CheckpointError):
            raise result
        return result

    @property
    def is_local(self) -> bool:
        """Whether the root is on a local filesystem (each call a system call, not a request)."""
        return self._is_local

    @property
    def reads_concurrently(self) -> bool:
        """Whether read_many has several reads in flight (an async filesystem: s3fs, gcsfs, adlfs...)."""
        return not self._is_local and isinstance(self._fs, fsspec.asyn.AsyncFileSystem)

    def read_many(
        self, relpaths: Sequence[str], *, max_bytes: int | None = MAX_LOG_FILE_BYTES
    ) -> dict[str, bytes | CheckpointError]:
        """Read whole files; each maps to its content or to the error read_bytes would raise.

        On an async filesystem REMOTE_READS_IN_FLIGHT GETs are in flight at a time (fsspec's
        cat_ranges): one GET after another paid a round trip per file, and a first sync of a
        long history reads two small files per batch. Elsewhere the files are read in turn.
        Counted as one read call per file, as read_bytes would.
        """
        if not self.reads_concurrently:
            return {relpath: self._read_or_error(relpath, max_bytes) for relpath in relpaths}
        results: dict[str, bytes | CheckpointError] = {}
        paths: dict[str, str] = {}
        for relpath in relpaths:
            try:
                paths[relpath] = self._path(relpath)
            except CheckpointError as exc:
                results[relpath] = exc
        contents = self._cat_all(list(paths.values()), max_bytes)
        for (relpath, path), content in zip(paths.items(), contents, strict=False):
            if isinstance(content, BaseException) and self._asked_past_the_end(path, 0, content):
                content = b""
            results[relpath] = self._checked_content(relpath, content, max_bytes)
        return results

    def _cat_all(self, paths: list[str], max_bytes: int | None) -> list[bytes | BaseException]:
        """The contents of ``paths`` (up to one byte past ``max_bytes``) read concurrently, or each one's error."""
        end = None if max_bytes is None else max_bytes + 1
        self.calls.read += len(paths)
        try:
            return self._fs.cat_ranges(paths, 0, end, on_error="return", batch_size=REMOTE_READS_IN_FLIGHT)
        except BACKEND_ERRORS as exc:  # the whole call failed (the store is unreachable, say)
            return [exc] * len(paths)

    def _asked_past_the_end(self, path: str, start: int, exc: BaseException) -> bool:
        """Tell whether a failed ranged read of an object asked for bytes at or past its end.

        Object stores answer such a range with 416 (not satisfiable): an empty file (Spark's
        "incomplete log file", which a crash can leave on a store without atomic renames) and an
        event log with no new bytes would read as storage failures (s3fs raises OSError EINVAL),
        and a probe would stop there. One info call tells; the read is then empty, as on disk.
        Only for the error such a range gives (EINVAL): while the store is unreachable, a second
        call per file would double every wait.
        """
        if self._is_local or not isinstance(exc, OSError) or exc.errno != errno.EINVAL:
            return False
        self.calls.info += 1
        self._fs.invalidate_cache(path)  # the size now, not that of a cached listing
        try:
            size = self._fs.info(path).get("size")
        except BACKEND_ERRORS:
            return False
        return size is not None and int(size) <= start

    def _read_or_error(self, relpath: str, max_bytes: int | None) -> bytes | CheckpointError:
        try:
            return self.read_bytes(relpath, max_bytes=max_bytes)
        except CheckpointError as exc:
            return exc

    def _checked_content(
        self, relpath: str, content: bytes | BaseException, max_bytes: int | None
    ) -> bytes | CheckpointError:
        """One result of cat_ranges as read_range would have returned or raised it."""
        if isinstance(content, FileNotFoundError):
            return MissingFileError(relpath, "no such file")
        if isinstance(content, CheckpointError):
            return content
        if isinstance(content, BaseException):
            error = storage_error(relpath, "cannot read the file", content)
            error.__cause__ = content
            return error
        data = bytes(content)
        self.calls.bytes_read += len(data)
        if max_bytes is not None and len(data) > max_bytes:
            return CorruptFileError(relpath, f"file is larger than the read limit of {max_bytes} bytes")
        return data

    def _read_local(self, path: str, relpath: str, start: int, end: int | None) -> bytes:
        """Read [start, end) of a local file in chunks.

        A local ``read(n)`` allocates n bytes before reading, so asking for the whole budget
        (1 GiB for state files) at once would reserve it for every small file.
        """
        chunks, position, size = [], start, None
        # A bare descriptor: the built-in open's buffered file object cost 9 us of the 18 us a
        # small log file took (and fsspec's local file object more), in a first sync of 200k files.
        descriptor = self._open_local(path, relpath)
        try:
            if start:
                os.lseek(descriptor, start, os.SEEK_SET)
            while end is None or position < end:
                wanted = _local_read_size(position, size, end)
                chunk = os.read(descriptor, wanted)
                chunks.append(chunk)
                position += len(chunk)
                if len(chunk) < wanted:  # a read of a regular file is short only at its end
                    break
                if size is None:
                    size = os.fstat(descriptor).st_size
        finally:
            os.close(descriptor)
        return b"".join(chunks)

    def _open_local(self, path: str, relpath: str) -> int:
        """Open a local file for reading, once it is known to be inside the allowed roots."""
        if self._held_directories is not None:
            descriptor = self._held_directories.open_file(path, relpath)
            if descriptor is not None:
                return descriptor
        return open_checked(path, os.O_RDONLY | os.O_CLOEXEC, self._check_opened_file, relpath)

    @contextlib.contextmanager
    def reusing_directories(self) -> Iterator[None]:
        """Within the block, a local file is opened inside its directory, opened and checked once.

        For a pass that reads many files (a sync): see workers.checkpoint.localdirs. Directories
        are held only until the block ends, and nothing changes for other filesystems.
        """
        if not self._is_local or self._held_directories is not None:
            yield
            return
        self._held_directories = HeldDirectories(self._check_opened_file)
        try:
            yield
        finally:
            held, self._held_directories = self._held_directories, None
            held.close()

    def _check_opened_file(self, descriptor: int, path: str, relpath: str) -> None:
        """Refuse a file that is, or lies below, a symbolic link leading out of the allowed roots.

        The kernel names the file actually opened (/proc/self/fd), so a link anywhere on the path
        is resolved with one call, and a link swapped after the check cannot redirect the read.
        """
        if self._real_roots is None:
            return
        try:
            real = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            real = os.path.realpath(path)  # no /proc: resolve the name instead
        if not (real + os.sep).startswith(self._real_roots):
            raise PathNotAllowedError(relpath, "the file is a symbolic link to a place outside the allowed roots")

    def copy_to_local(self, relpath: str, destination: str, *, max_bytes: int | None = None) -> int:
        """Copy a file to the new local file ``destination`` in chunks; return the bytes copied.

        For a library that reads files by name (RocksDB opens SST files itself): at most
        LOCAL_READ_CHUNK_BYTES are in memory at a time. Counted as one read call. Raises as
        read_bytes; StorageError naming ``relpath`` when ``destination`` cannot be written.
        """
        path = self._path(relpath)
        self.calls.read += 1
        try:
            with open(destination, "xb") as target:
                copied = self._copy_into(path, relpath, target, max_bytes)
        except CheckpointError:
            raise
        except FileNotFoundError as exc:
            if exc.filename == destination:
                raise storage_error(relpath, f"cannot copy the file to {destination}", exc) from exc
            raise MissingFileError(relpath, "no such file") from None
        except BACKEND_ERRORS as exc:
            raise storage_error(relpath, f"cannot copy the file to {destination}", exc) from exc
        self.calls.bytes_read += copied
        return copied

    def _copy_into(self, path: str, relpath: str, target: Any, max_bytes: int | None) -> int:
        if self._is_local:
            descriptor = self._open_local(path, relpath)
            source = os.fdopen(descriptor, "rb", buffering=0)
        else:
            source = self._fs.open(path, "rb", block_size=LOCAL_READ_CHUNK_BYTES)
        copied = 0
        with source:
            while chunk := source.read(LOCAL_READ_CHUNK_BYTES):
                copied += len(chunk)
                if max_bytes is not None and copied > max_bytes:
                    raise CorruptFileError(relpath, f"file is larger than the read limit of {max_bytes} bytes")
                target.write(chunk)
        return copied

    def find_bytes(self, relpath: str, *, max_bytes: int | None = MAX_LOG_FILE_BYTES) -> bytes | None:
        """Return the content of a file, or None when it does not exist."""
        try:
            return self.read_bytes(relpath, max_bytes=max_bytes)
        except MissingFileError:
            return None

    def find_info(self, relpath: str = "") -> FileInfo | None:
        """Return what is at ``relpath`` (the root itself by default), or None when nothing is.

        On an object store a folder is a prefix with objects below it: an empty one is nothing.
        """
        path = self._path(relpath)
        self.calls.info += 1
        if self._is_local:
            return self._local_info(path, relpath)
        self._fs.invalidate_cache(path)
        try:
            entry = self._fs.info(path)
        except FileNotFoundError:
            return None
        except BACKEND_ERRORS as exc:
            raise storage_error(relpath or ".", "cannot look the path up", exc) from exc
        return file_info(entry)

    def _local_info(self, path: str, relpath: str) -> FileInfo | None:
        try:
            status = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise storage_error(relpath or ".", "cannot look the path up", exc) from exc
        # As reads do, refuse what a symbolic link leads out of the allowed roots.
        if self._real_roots is not None and not (os.path.realpath(path) + os.sep).startswith(self._real_roots):
            raise PathNotAllowedError(
                relpath or self.url, "the path is a symbolic link to a place outside the allowed roots"
            )
        return FileInfo(posixpath.basename(path), status.st_size, status.st_mtime, stat.S_ISDIR(status.st_mode))

    def has_file(self, relpath: str) -> bool:
        """Tell whether a file is at ``relpath``, in one request whatever the backend: on an object
        store a GET of its first byte (s3fs's info of a missing key also lists the prefix, to tell
        a folder: two requests for each name probed and not found)."""
        if self._is_local:
            info = self.find_info(relpath)
            return info is not None and not info.is_dir
        path = self._path(relpath)
        self.calls.read += 1
        try:
            self._fs.cat_file(path, start=0, end=1)
        except FileNotFoundError:
            return False
        except BACKEND_ERRORS as exc:
            if self._asked_past_the_end(path, 0, exc):  # an empty file
                return True
            raise storage_error(relpath, "cannot look the file up", exc) from exc
        return True

    def find_file(self, relpath: str) -> FileInfo | None:
        """The file at ``relpath``, or None when there is none (a folder there is nothing).

        For names that are only ever files and usually not there yet (the snapshot or zip a state
        follow looks for at each version): on an object store a missing name costs one request
        (has_file) where find_info costs two (a HEAD, then a LIST to tell a folder), and a name
        that is there two (has_file, then find_info's HEAD).
        """
        if not self._is_local and not self.has_file(relpath):
            return None
        info = self.find_info(relpath)
        return None if info is None or info.is_dir else info

    def exists(self, relpath: str) -> bool:
        """Tell whether a file or directory exists."""
        path = self._path(relpath)
        self.calls.info += 1
        try:
            return bool(self._fs.exists(path))
        except BACKEND_ERRORS as exc:
            raise storage_error(relpath or ".", "cannot check whether the path exists", exc) from exc

    def write_atomic(self, relpath: str, data: bytes, *, overwrite: bool = False) -> None:
        """Write a whole file so that readers see either nothing or all of it.

        As Spark's CheckpointFileManager.createAtomic: the bytes go to ``.<name>.<uuid>.tmp`` in
        the same directory (a name no Spark reader counts), are flushed to disk, and only then
        take the final name. Without ``overwrite`` an existing file is never replaced
        (StorageError, "already exists"), the write-once rule of metadata logs. On any failure
        the temporary file is removed.
        """
        path = self._path(relpath)
        directory, name = posixpath.split(path)
        temporary = posixpath.join(directory, f".{name}.{uuid.uuid4()}.tmp")
        self.calls.write += 1
        try:
            self._fs.makedirs(directory, exist_ok=True)
            self._write_file(temporary, data)
            self._rename_into_place(temporary, path, relpath, overwrite=overwrite)
        except BaseException as exc:
            self._discard(temporary)
            if isinstance(exc, BACKEND_ERRORS) and not isinstance(exc, (FileExistsError, CheckpointError)):
                raise storage_error(relpath, "cannot write the file", exc) from exc
            raise
        self.calls.bytes_written += len(data)

    def _write_file(self, path: str, data: bytes) -> None:
        if self._is_local:
            with open(path, "xb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        else:
            self._fs.pipe_file(path, data)

    def _rename_into_place(self, temporary: str, path: str, relpath: str, *, overwrite: bool) -> None:
        if self._is_local:
            if overwrite:
                os.replace(temporary, path)
            else:
                try:
                    # link() fails when the target exists, as Hadoop's rename(NONE) does.
                    os.link(temporary, path)
                except FileExistsError:
                    raise StorageError(relpath, "cannot write the file: it already exists") from None
                os.unlink(temporary)
            fsync_directory(posixpath.dirname(path))
            return
        if not overwrite and self._fs.exists(path):
            raise StorageError(relpath, "cannot write the file: it already exists")
        self._fs.mv(temporary, path)

    def _discard(self, path: str) -> None:
        try:
            self._fs.rm_file(path)
        except (FileNotFoundError, *BACKEND_ERRORS):
            pass  # nothing was written, or the temporary file is already gone

    def stamp(self, relpath: str) -> float | None:
        """Create an empty file, read the modification time the storage gave it, and delete it.

        This is how the storage's clock is read (``maintenance.clock``). Returns None when the
        storage keeps no modification times. The file is removed even when reading it fails.
        """
        path = self._path(relpath)
        self.calls.write += 1
        try:
            self._write_file(path, b"")
            if self._is_local:
                return os.stat(path).st_mtime
            self.calls.info += 1
            self._fs.invalidate_cache(path)
            return mtime_seconds(self._fs.info(path))
        except BACKEND_ERRORS as exc:
            raise storage_error(relpath, "cannot write a probe file", exc) from exc
        finally:
            self.calls.delete += 1
            self._discard(path)

    def delete(self, relpath: str) -> bool:
        """Delete one file; return False when it did not exist (deleting twice is harmless)."""
        path = self._path(relpath)
        if not relpath:
            raise PathNotAllowedError(relpath, "refusing to delete the checkpoint root")
        self.calls.delete += 1
        try:
            self._fs.rm_file(path)
        except FileNotFoundError:
            return False
        except BACKEND_ERRORS as exc:
            raise storage_error(relpath, "cannot delete the file", exc) from exc
        return True

    def _path(self, relpath: str) -> str:
        """Join a '/'-separated relative path to the root, refusing anything that could escape."""
        if not isinstance(relpath, str):
            raise TypeError(f"relpath must be a str, not {type(relpath).__name__}")
        if not relpath:
            return self._root
        segments = relpath.split("/")
        if any(segment in ("", ".", "..") for segment in segments):
            raise PathNotAllowedError(
                relpath, "a relative path must use '/' without leading, empty, '.' or '..' segments"
            )
        # Plain concatenation: the segments are checked, and posixpath.join cost more per read.
        return f"{self._root.rstrip('/')}/{relpath}" if self._root else relpath
