"""Reading the metadata logs of a checkpoint through its storage (HDFSMetadataLog's reads).

Layout below the checkpoint root::

    metadata          the query id (StreamMetadata)
    offsets/<N>       OffsetSeqLog, one file per batch
    commits/<N>       CommitLog, one file per finished batch

These functions join the pure parsers to ``CheckpointStorage``: each reads one file (at most
``storage.MAX_LOG_FILE_BYTES``) and names it by its path relative to the root in every error.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .commits import CommitMetadata, parse_commit
from .layout import COMMITS_DIR, METADATA_FILE, OFFSETS_DIR, parse_batch_id
from .metadata import StreamMetadata, parse_stream_metadata
from .offsets import OffsetSeq, parse_offset_seq

if TYPE_CHECKING:
    # Annotations only: the readers need just the methods of CheckpointStorage.
    from .fileinfo import FileInfo
    from .storage.checkpointstorage import CheckpointStorage


def list_batch_ids(storage: CheckpointStorage, dirname: str, *, compactible: bool = False) -> list[int]:
    """Return the sorted batch ids of the files in a log directory ([] when it is missing).

    Ignores directories, ``.N.crc`` checksums, temporary files and any other name that is not a
    batch id; ``N.compact`` counts only for compactible logs.
    """
    listed = getattr(storage, "batch_ids", None)  # a TreeListing keeps them
    if listed is not None:
        return listed(dirname, compactible=compactible)
    return batch_ids_of(storage.list_dir(dirname), compactible=compactible)


def batch_ids_of(entries: Iterable[FileInfo], *, compactible: bool = False) -> list[int]:
    """The sorted batch ids among the entries of a log directory (list_batch_ids)."""
    ids = (parse_batch_id(info.name, compactible) for info in entries if not info.is_dir)
    return sorted(batch_id for batch_id in ids if batch_id is not None)


def read_offset_seq(storage: CheckpointStorage, batch_id: int) -> OffsetSeq:
    """Read and parse ``offsets/<batch_id>``; MissingFileError when it does not exist."""
    relpath = _batch_path(OFFSETS_DIR, batch_id)
    return parse_offset_seq(storage.read_bytes(relpath), source=relpath)


def read_commit(storage: CheckpointStorage, batch_id: int) -> CommitMetadata:
    """Read and parse ``commits/<batch_id>``; MissingFileError when it does not exist."""
    relpath = _batch_path(COMMITS_DIR, batch_id)
    return parse_commit(storage.read_bytes(relpath), source=relpath)


def find_stream_metadata(storage: CheckpointStorage) -> StreamMetadata | None:
    """Read and parse the ``metadata`` file, or return None when the query never started."""
    data = storage.find_bytes(METADATA_FILE)
    return None if data is None else parse_stream_metadata(data, source=METADATA_FILE)


def _batch_path(dirname: str, batch_id: int) -> str:
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise ValueError(f"batch_id must be a non-negative int, got {batch_id!r}")
    return f"{dirname}/{batch_id}"
