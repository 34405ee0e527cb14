"""The storage edge: the only module of the library that imports fsspec.

A ``CheckpointStorage`` is one checkpoint root (a local path or any fsspec URL such as
``file:///data/ckpt``, ``memory://ckpt`` or ``s3://bucket/ckpt``). Everything below it is named
by a relative path that always uses ``/`` (``offsets/3``, ``state/0/1/4.delta``). This module
checks that the root lies under an allowed root, lists and reads, counts every call, and
translates ``FileNotFoundError``, ``PermissionError`` and other OS/fsspec errors into the
library's own errors with the relative path attached.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import os
import posixpath
import re
import stat
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import fsspec
import fsspec.asyn
import fsspec.exceptions

from .errors import CheckpointError, CorruptFileError, MissingFileError, PathNotAllowedError, StorageError
from .fileinfo import FileInfo
from .localdirs import HeldDirectories, open_checked

# Metadata-log files are a few hundred bytes; the budget only stops a bogus huge file from
# exhausting memory. Callers reading big files (state snapshots) pass their own max_bytes.
MAX_LOG_FILE_BYTES = 64 * 1024 * 1024

# s3fs, gcsfs and adlfs translate their client errors into OSError subclasses; FSTimeoutError
# is fsspec's own for async backends.
# What a backend call may raise besides FileNotFoundError: anything. Backends have their own
# exception types (botocore's EndpointConnectionError while S3 is unreachable is no OSError), and
# a storage failure of one file must become a StorageError naming it, not a crash of the sync.
_BACKEND_ERRORS = (Exception,)

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_LOCAL_SCHEMES = frozenset({"file", "local"})
# Local reads go in pieces of this size (see CheckpointStorage._read_local).
LOCAL_READ_CHUNK_BYTES = 4 * 1024 * 1024
# Reads read_many keeps in flight on an object store. botocore's connection pool must hold as many
# (workers.storage_options sets max_pool_connections to this).
REMOTE_READS_IN_FLIGHT = 16
# The first read of a local file: a log file of a batch is about 1 KB.
LOCAL_FIRST_READ_BYTES = 8 * 1024
# fsspec listing keys that carry a modification time, most specific first. The memory
# filesystem only records "created", which is the mtime of Spark's write-once files.
_MTIME_KEYS = ("mtime", "LastModified", "last_modified", "updated", "created")


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


@dataclass(frozen=True, slots=True)
class _Location:
    """A URL split into its scheme and a normalised path."""

    protocol: str
    path: str  # local: absolute and normalised; remote: "bucket/key" without '.' or '..'

    @property
    def url(self) -> str:
        return f"{self.protocol}://{self.path}"


def check_allowed(url: str, allowed_roots: Sequence[str] | None) -> str:
    """Return the normalised form of ``url`` after checking it against ``allowed_roots``.

    Opens nothing, so a form can validate user input with it. ``allowed_roots=None`` allows
    every URL; an empty sequence allows none. Raises PathNotAllowedError naming ``url``.
    """
    location = _parse_location(url)
    if allowed_roots is None:
        return location.url
    if isinstance(allowed_roots, (str, bytes)):
        raise TypeError("allowed_roots must be a list of root URLs, not one string: wrap it in [...]")
    roots = [_parse_location(root) for root in allowed_roots]
    if any(_is_inside(location, root) for root in roots):
        return location.url
    raise PathNotAllowedError(url, _refusal_reason(location, roots))


def _parse_location(url: str) -> _Location:
    """Split ``url`` into scheme and path; plain paths are local and made absolute."""
    if not isinstance(url, str):
        raise TypeError(f"a checkpoint URL must be a str, not {type(url).__name__}")
    if not url.strip():
        raise PathNotAllowedError(repr(url), "the checkpoint URL is empty")
    if "::" in url:
        raise PathNotAllowedError(url, "chained fsspec URLs ('::') are not supported")
    protocol, separator, rest = url.partition("://")
    if not separator:
        protocol, rest = "file", url
    protocol = protocol.lower()
    if not _SCHEME.fullmatch(protocol):
        raise PathNotAllowedError(url, f"{protocol!r} is not a URL scheme")
    if protocol in _LOCAL_SCHEMES:
        return _Location("file", os.path.normpath(os.path.abspath(rest)))
    return _Location(protocol, _remote_path(url, rest))


def _remote_path(url: str, rest: str) -> str:
    """Normalise the path of a remote URL, where '..' has no meaning the server would resolve."""
    segments = rest.split("/")
    if any(segment in (".", "..") for segment in segments):
        raise PathNotAllowedError(url, "'.' and '..' segments are not allowed in a URL")
    path = "/".join(segment for segment in segments if segment)
    if not path:
        raise PathNotAllowedError(url, "the URL has no path after the scheme")
    return path


def _is_inside(location: _Location, root: _Location) -> bool:
    """Tell whether ``location`` is ``root`` or below it (local paths with symlinks resolved)."""
    if location.protocol != root.protocol:
        return False
    if location.protocol == "file":
        path, root_path = os.path.realpath(location.path), os.path.realpath(root.path)
        return os.path.commonpath([path, root_path]) == root_path
    return location.path == root.path or location.path.startswith(root.path + "/")


def _refusal_reason(location: _Location, roots: list[_Location]) -> str:
    if not roots:
        return "no checkpoint roots are configured"
    if all(root.protocol != location.protocol for root in roots):
        return f"the scheme {location.protocol!r} is not allowed"
    allowed = ", ".join(root.url for root in roots)
    return f"the path is outside the allowed roots ({allowed})"


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
        # Local roots with symlinks resolved: a file below the checkpoint may itself be a link
        # out of them, which reads check (None: every place is allowed).
        # Each ends with one separator, so a prefix test is a containment test (root /a does not
        # hold /ab); it is called once per file read, where os.path.commonpath cost ten times more.
        self._real_roots = (
            None
            if allowed_roots is None
            else tuple(
                os.path.realpath(root.path).rstrip(os.sep) + os.sep
                for root in map(_parse_location, allowed_roots)
                if root.protocol == "file"
            )
        )
        try:
            self._fs, root = fsspec.core.url_to_fs(self.url, **(storage_options or {}))
        except (ImportError, ValueError) as exc:
            # An unknown scheme, or a backend such as s3fs that is not installed.
            raise StorageError(self.url, f"cannot open this filesystem: {exc}") from exc
        self._root = root if root == "/" else root.rstrip("/")
        protocols = self._fs.protocol if isinstance(self._fs.protocol, tuple) else (self._fs.protocol,)
        self._is_local = bool(_LOCAL_SCHEMES & set(protocols))
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
            return _list_local(path, relpath, self._check_opened_file)
        try:
            entries = self._fs.ls(path, detail=True)
        except FileNotFoundError:
            return []
        except _BACKEND_ERRORS as exc:
            raise _storage_error(relpath or ".", "cannot list the directory", exc) from exc
        # Some backends list the directory itself, or the file when `path` is a file.
        infos = [_file_info(entry) for entry in entries if entry["name"].rstrip("/") != path]
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
        except _BACKEND_ERRORS as exc:
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
        end = None if max_bytes is None else max_bytes + 1
        self.calls.read += len(paths)
        try:
            contents = self._fs.cat_ranges(
                list(paths.values()), 0, end, on_error="return", batch_size=REMOTE_READS_IN_FLIGHT
            )
        except _BACKEND_ERRORS as exc:  # the whole call failed (the store is unreachable, say)
            contents = [exc] * len(paths)
        for (relpath, path), content in zip(paths.items(), contents, strict=False):
            if isinstance(content, BaseException) and self._asked_past_the_end(path, 0, content):
                content = b""
            results[relpath] = self._checked_content(relpath, content, max_bytes)
        return results

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
        except _BACKEND_ERRORS:
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
            error = _storage_error(relpath, "cannot read the file", content)
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
                if size is None:
                    # Most log files end within a first small read, without asking their size.
                    wanted = LOCAL_FIRST_READ_BYTES
                else:
                    # Then the size the file has now, plus one byte to see its end in the same
                    # call (a full chunk per small file cost 20 us).
                    wanted = (
                        min(LOCAL_READ_CHUNK_BYTES, size - position + 1) if position < size else LOCAL_READ_CHUNK_BYTES
                    )
                wanted = wanted if end is None else min(wanted, end - position)
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
                raise _storage_error(relpath, f"cannot copy the file to {destination}", exc) from exc
            raise MissingFileError(relpath, "no such file") from None
        except _BACKEND_ERRORS as exc:
            raise _storage_error(relpath, f"cannot copy the file to {destination}", exc) from exc
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
        except _BACKEND_ERRORS as exc:
            raise _storage_error(relpath or ".", "cannot look the path up", exc) from exc
        return _file_info(entry)

    def _local_info(self, path: str, relpath: str) -> FileInfo | None:
        try:
            status = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise _storage_error(relpath or ".", "cannot look the path up", exc) from exc
        # As reads do, refuse what a symbolic link leads out of the allowed roots.
        if self._real_roots is not None and not (os.path.realpath(path) + os.sep).startswith(self._real_roots):
            raise PathNotAllowedError(
                relpath or self.url, "the path is a symbolic link to a place outside the allowed roots"
            )
        return FileInfo(posixpath.basename(path), status.st_size, status.st_mtime, stat.S_ISDIR(status.st_mode))

    def exists(self, relpath: str) -> bool:
        """Tell whether a file or directory exists."""
        path = self._path(relpath)
        self.calls.info += 1
        try:
            return bool(self._fs.exists(path))
        except _BACKEND_ERRORS as exc:
            raise _storage_error(relpath or ".", "cannot check whether the path exists", exc) from exc

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
            if isinstance(exc, _BACKEND_ERRORS) and not isinstance(exc, (FileExistsError, CheckpointError)):
                raise _storage_error(relpath, "cannot write the file", exc) from exc
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
            _fsync_directory(posixpath.dirname(path))
            return
        if not overwrite and self._fs.exists(path):
            raise StorageError(relpath, "cannot write the file: it already exists")
        self._fs.mv(temporary, path)

    def _discard(self, path: str) -> None:
        try:
            self._fs.rm_file(path)
        except (FileNotFoundError, *_BACKEND_ERRORS):
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
            return _mtime_seconds(self._fs.info(path))
        except _BACKEND_ERRORS as exc:
            raise _storage_error(relpath, "cannot write a probe file", exc) from exc
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
        except _BACKEND_ERRORS as exc:
            raise _storage_error(relpath, "cannot delete the file", exc) from exc
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


def _fsync_directory(directory: str) -> None:
    """Make a rename durable: POSIX keeps directory entries in the directory's own inode."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _list_local(path: str, relpath: str, check_opened: Callable[[int, str, str], None]) -> list[FileInfo]:
    """List a local directory with one scandir (fsspec's local ls costs a stat and more per entry).

    The directory is opened first and ``check_opened`` asks the kernel where it is, as reads do:
    a directory that is, or lies below, a link out of the allowed roots is refused, not listed.
    Like fsspec's, entries follow symbolic links (a dangling link is listed as itself); a missing
    directory, or a file, lists as [].
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise _storage_error(relpath or ".", "cannot list the directory", exc) from exc
    infos = []
    try:
        check_opened(descriptor, path, relpath)
        with os.scandir(descriptor) as entries:
            for entry in entries:
                try:
                    status = entry.stat()
                except FileNotFoundError:
                    status = entry.stat(follow_symlinks=False)
                infos.append(FileInfo(entry.name, status.st_size, status.st_mtime, stat.S_ISDIR(status.st_mode)))
    except OSError as exc:
        raise _storage_error(relpath or ".", "cannot list the directory", exc) from exc
    finally:
        os.close(descriptor)
    return sorted(infos, key=lambda info: info.name)


def _file_info(entry: dict[str, Any]) -> FileInfo:
    """Turn one fsspec ``ls(detail=True)`` entry into a FileInfo."""
    name = posixpath.basename(entry["name"].rstrip("/"))
    is_dir = entry.get("type") == "directory"
    return FileInfo(name=name, size=int(entry.get("size") or 0), mtime=_mtime_seconds(entry), is_dir=is_dir)


def _mtime_seconds(entry: dict[str, Any]) -> float | None:
    """Find the modification time in a listing entry, whatever the backend calls it."""
    for key in _MTIME_KEYS:
        value = entry.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, datetime.datetime):
            return value.timestamp()
        if isinstance(value, str):
            try:
                return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def _storage_error(relpath: str, action: str, exc: BaseException) -> StorageError:
    """Build the StorageError for a failed backend call, keeping the backend's explanation."""
    if isinstance(exc, PermissionError):
        return StorageError(relpath, f"{action}: permission denied")
    return StorageError(relpath, f"{action}: {type(exc).__name__}: {exc}")
