"""Local files without fsspec's file objects: one scandir per listing, and fsync of a directory so a
rename is durable. Each call is a system call, so the local path is the fast one (a first sync of
200k files).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from ..fileinfo import FileInfo
from .entries import storage_error


def fsync_directory(directory: str) -> None:
    """Make a rename durable: POSIX keeps directory entries in the directory's own inode."""
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def list_local(path: str, relpath: str, check_opened: Callable[[int, str, str], None]) -> list[FileInfo]:
    """List a local directory with one scandir (fsspec's local ls costs a stat and more per entry).

    The directory is opened first and ``check_opened`` asks the kernel where it is, as reads do:
    a directory that is, or lies below, a link out of the allowed roots is refused, not listed.
    Like fsspec's, entries follow symbolic links (a dangling link is listed as itself); a missing
    directory, or a file, lists as [].
    """
    descriptor = _open_directory(path, relpath)
    if descriptor is None:
        return []
    infos = []
    try:
        check_opened(descriptor, path, relpath)
        with os.scandir(descriptor) as entries:
            for entry in entries:
                if (status := _entry_status(entry)) is not None:
                    infos.append(FileInfo(entry.name, status.st_size, status.st_mtime, stat.S_ISDIR(status.st_mode)))
    except OSError as exc:
        raise storage_error(relpath or ".", "cannot list the directory", exc) from exc
    finally:
        os.close(descriptor)
    return sorted(infos, key=lambda info: info.name)


def _open_directory(path: str, relpath: str) -> int | None:
    """A descriptor of the directory; None when it is missing or a file."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise storage_error(relpath or ".", "cannot list the directory", exc) from exc


def _entry_status(entry: os.DirEntry) -> os.stat_result | None:
    """The entry's status, following a link (a dangling link: the link's own); None when the entry
    is gone since the directory was read. A writer renames its temporary files while we list
    (Spark's `.N.delta.<uuid>.tmp` and their CRCs): such a file is listed as a moment later, absent."""
    try:
        return entry.stat()
    except FileNotFoundError:
        pass
    try:
        return entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return None
