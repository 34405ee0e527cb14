"""One entry of a directory listing: ``FileInfo``, what the storage edge's listings return.

Its own module because nearly every part of the library handles listings (the inventory, the
logs, the integrity checks, the maintenance plans) and most of them need nothing else of the
storage edge.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of a directory listing; ``mtime`` is in seconds since the epoch, if known."""

    name: str
    size: int
    mtime: float | None
    is_dir: bool
