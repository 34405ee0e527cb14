"""The facts the checks look at: one listing of the checkpoint and the outcomes of the few reads a restart makes.

Kept apart from the gathering (the edge, which does I/O) and from the rules (pure functions of
these facts), which both depend on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import CheckpointError
from ..fileinfo import FileInfo
from ..inventory import TreeListing
from ..layout import COMMITS_DIR, OFFSETS_DIR
from ..logdir import list_batch_ids
from ..metadatalog import DEFAULT_COMPACT_INTERVAL, LogKind
from ..stateschema import OperatorStateMetadata, StoreSchema


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    """What reading one file (or one compactible log) gave: a parsed value, or the error."""

    path: str
    value: Any = None
    error: CheckpointError | None = None


@dataclass(frozen=True, slots=True)
class CompactibleLog:
    """A file source's or file sink's log: its listing and the outcome of reading it as allFiles does.

    ``path`` is the directory relative to the checkpoint root, or the sink log's URL.
    """

    path: str
    kind: LogKind
    files: tuple[FileInfo, ...]
    outcome: ReadOutcome
    # The query's configured compactInterval: Spark's interval until a .compact file exists.
    default_interval: int = DEFAULT_COMPACT_INTERVAL


@dataclass(frozen=True, slots=True)
class OperatorDescription:
    """What an operator's metadata and its partition 0's state schema say (None: absent or unreadable)."""

    operator: int
    metadata: OperatorStateMetadata | None
    schema: StoreSchema | None


@dataclass(frozen=True, slots=True)
class CheckpointFacts:
    """Everything the checks look at, gathered by one walk and a handful of reads."""

    listing: TreeListing
    reads: tuple[ReadOutcome, ...]
    logs: tuple[CompactibleLog, ...] = ()
    sink_log_failures: tuple[CheckpointError, ...] = ()
    # The sink log's own listing (kept for the inventory, which then needs no second walk).
    sink_listing: TreeListing | None = None
    # When the listing was taken (epoch seconds): tells a write in progress from a leftover.
    observed_at: float | None = None
    # Operators listed with partition 0 only, described so that one Spark runs on one partition is told.
    lone_partition_operators: tuple[OperatorDescription, ...] = ()
    # The batch ids listed in offsets/ and commits/, worked out once: the checks ask for them often.
    offset_ids: list[int] = field(init=False)
    commit_ids: list[int] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offset_ids", list_batch_ids(self.listing, OFFSETS_DIR))  # type: ignore[arg-type]
        object.__setattr__(self, "commit_ids", list_batch_ids(self.listing, COMMITS_DIR))  # type: ignore[arg-type]

    @property
    def predates_commit_log(self) -> bool:
        """Whether Spark 2.1 or earlier wrote this checkpoint: no ``commits/`` directory (Spark 2.2
        and later create it at start) and the latest offsets carry no SQL conf (added in 2.2).

        Both are asked, so that a newer checkpoint whose commit log was deleted is not taken for one.
        """
        if any(info.is_dir and info.name == COMMITS_DIR for info in self.listing.list_dir()) or not self.offset_ids:
            return False
        latest = self.value_of(f"{OFFSETS_DIR}/{self.offset_ids[-1]}")
        return latest is not None and (latest.metadata is None or not latest.metadata.conf)

    def value_of(self, path: str) -> Any:
        """The parsed value of a file that was read, or None."""
        return next((read.value for read in self.reads if read.path == path), None)
