"""What a skip plans for one batch: where the query's logs are, and the survey of its writes,
preconditions and notes, which skipbatch.py starts and skipstate.py adds the state's part to.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..metadatalog import DEFAULT_COMPACT_INTERVAL
from ..statesummary import StateConf
from ..storage.checkpointstorage import CheckpointStorage
from ..wording import plural
from .plan import PlannedWrite, Precondition

ACTION = "skip"


# Marks a plan path in the file sink's storage (outside the checkpoint), relative to the sink's root:
# the convention of the rewind branch's execute.SINK_PATH_PREFIX, so that one apply_plan with the sink
# storage can carry the whole plan once both are merged.
SINK_PREFIX = "@sink/"


# A compactible log file without entries: what FileStreamSink logs for a batch that wrote no file.
COMPACTIBLE_LOG_HEADER = b"v1"


# A state file without records: only the int32 -1 that ends every delta, snapshot and v1 changelog.
NO_RECORDS = struct.pack(">i", -1)


SHUFFLE_PARTITIONS_CONF = "spark.sql.shuffle.partitions"


@dataclass(frozen=True, slots=True)
class LogSettings:
    """Where the query's file sink is (None: unknown or none) and the configured compact interval."""

    sink_storage: CheckpointStorage | None = None
    compact_interval: int = DEFAULT_COMPACT_INTERVAL


@dataclass
class SkipSurvey:
    """What carrying batch N's state forward takes: the writes, their preconditions and notes."""

    batch: int
    conf: StateConf
    partitions: int | None
    writes: list[PlannedWrite] = field(default_factory=list)
    preconditions: list[Precondition] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    stores: int = 0

    def summary(self) -> str:
        state = f" and carry the state of {plural(self.stores, 'store')} forward" if self.stores else ""
        return f"mark batch {self.batch} done without running it{state} (write {plural(len(self.writes), 'file')})"
