"""Local files opened relative to their directory, which is opened and checked once.

Opening a file by its full name makes the kernel resolve every component of the name, and the
check that the file is inside the allowed roots (CheckpointStorage._check_opened_file, a
readlink of /proc/self/fd/N) is one more system call per file: together 7.6 us of the 10 us a
small log file took, while a first sync reads 200,000 of them from two directories
(docs/benchmarks.md, P2). Opened as a name inside a directory descriptor that was checked, with
O_NOFOLLOW, a file is 3.1 us, and it is inside the roots: the directory is, and the kernel
refuses to follow the name if it is a link (the caller then opens and checks it the long way).
"""

from __future__ import annotations

import errno
import os
from collections import OrderedDict
from collections.abc import Callable

# Directories held open at once. A sync reads mostly from offsets/ and commits/, and a state
# store spreads over one directory per partition (up to thousands): the least recently used
# one is closed, so a process never nears its limit of open descriptors.
MAX_HELD_DIRECTORIES = 64

CheckOpened = Callable[[int, str, str], None]


def open_checked(path: str, flags: int, check: CheckOpened, relpath: str) -> int:
    """Open ``path`` and pass the descriptor to ``check``; closed again if the check refuses it."""
    descriptor = os.open(path, flags)
    try:
        check(descriptor, path, relpath)
    except BaseException:
        os.close(descriptor)
        raise
    return descriptor


class HeldDirectories:
    """Directory descriptors already checked by ``check(descriptor, path, relpath)``, by path.

    A directory is checked when it is first opened and used as it was then: a name swapped for a
    link afterwards does not redirect reads through the held descriptor. Hold them for one pass
    over the files (CheckpointStorage.reusing_directories), not for ever: a directory deleted and
    made again would still be the old one here.
    """

    def __init__(self, check: CheckOpened, *, limit: int = MAX_HELD_DIRECTORIES) -> None:
        self._check = check
        self._limit = limit
        self._descriptors: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._descriptors)

    def open_file(self, path: str, relpath: str) -> int | None:
        """Open the file at ``path`` for reading; None when it is a symbolic link.

        Errors are the OSError of opening the directory or the file (FileNotFoundError for
        either), or what ``check`` raises for the directory, with ``relpath`` as the file's name.
        """
        directory, _, name = path.rpartition("/")
        descriptor = self._directory(directory or "/", relpath)
        try:
            return os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=descriptor)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None
            raise

    def close(self) -> None:
        while self._descriptors:
            os.close(self._descriptors.popitem()[1])

    def _directory(self, directory: str, relpath: str) -> int:
        descriptor = self._descriptors.get(directory)
        if descriptor is not None:
            self._descriptors.move_to_end(directory)
            return descriptor
        descriptor = open_checked(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, self._check, relpath)
        self._descriptors[directory] = descriptor
        if len(self._descriptors) > self._limit:
            os.close(self._descriptors.popitem(last=False)[1])
        return descriptor
