"""The storage's clock, read by stamping a file, so that file ages are measured on the clock that dated them.

Spark's files are dated by the storage (the object store, the namenode, the local kernel), whose
clock need not agree with this worker's. Measured on the worker's clock, a storage an hour behind
makes a query that wrote a batch a second ago look idle for an hour, and a temporary file still
being written look abandoned: both would let maintenance act on a running query. So planning
writes an empty file, reads back the time the storage gave it, and measures ages from the
storage's "now".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..storage.checkpointstorage import CheckpointStorage
from .plan import Precondition, precondition

# The probe is named as an atomic write's temporary file (``.<name>.<uuid>.tmp``) at the checkpoint
# root: no Spark reader lists there, and one a killed worker leaves is garbage that cleanup removes.
PROBE_NAME = ".ckptweb-clock"
# Object stores date to the second (S3's Last-Modified): an integral stamp may be up to 1 s early.
WHOLE_SECOND_RESOLUTION = 1.0
# Filesystems stamp from a coarse kernel clock, a few milliseconds behind the precise one.
FINE_RESOLUTION = 0.05


@dataclass(frozen=True, slots=True)
class StorageClock:
    """The storage's clock minus this worker's (``offset``, seconds), known within ``uncertainty``."""

    offset: float
    uncertainty: float

    def now(self, local_now: float) -> float:
        """The storage's time at ``local_now``, taken at the early end of the uncertainty.

        The early end makes every file look as young as it could be, so an age threshold is met
        late rather than early.
        """
        return local_now + self.offset - self.uncertainty

    def describe(self, where: str) -> str:
        """The reading as the "storage-clock" precondition's detail says it."""
        if abs(self.offset) <= self.uncertainty:
            return (
                f"the clock of {where} agrees with this worker's (within {self.uncertainty:.1f} s, "
                "read by stamping a file)"
            )
        direction = "ahead of" if self.offset > 0 else "behind"
        return (
            f"the clock of {where} is {abs(self.offset):,.1f} s {direction} this worker's "
            f"(± {self.uncertainty:.1f} s, read by "
            "stamping a file): file ages are measured on the storage's clock"
        )


def clock_from_stamp(sent_at: float, answered_at: float, stamped_at: float) -> StorageClock:
    """The clock a stamp reveals: the file was dated somewhere between sending and the answer."""
    midpoint = (sent_at + answered_at) / 2
    resolution = WHOLE_SECOND_RESOLUTION if stamped_at == int(stamped_at) else FINE_RESOLUTION
    return StorageClock(offset=stamped_at - midpoint, uncertainty=(answered_at - sent_at) / 2 + resolution)


def read_storage_clock(storage: CheckpointStorage, *, clock: Callable[[], float] = time.time) -> StorageClock | None:
    """Stamp a probe file in ``storage``; None when the storage keeps no modification times."""
    sent_at = clock()
    stamped_at = storage.stamp(f"{PROBE_NAME}.{uuid.uuid4()}.tmp")
    answered_at = clock()
    return None if stamped_at is None else clock_from_stamp(sent_at, answered_at, stamped_at)


def storage_now(storages: Iterable[CheckpointStorage], local_now: float) -> tuple[float, tuple[Precondition, ...]]:
    """ "Now" for a plan over ``storages``: the earliest of their clocks, with a "storage-clock"
    precondition for each clock read, whose detail is the reading (it holds: a clock off is measured
    on, not refused).

    A storage that keeps no times gives no reading and no correction (the plan's precondition on
    modification times refuses then).
    """
    now, readings = None, []
    for storage in {storage.url: storage for storage in storages}.values():
        reading = read_storage_clock(storage)
        if reading is None:
            continue
        now = reading.now(local_now) if now is None else min(now, reading.now(local_now))
        readings.append(precondition("storage-clock", True, reading.describe(storage.url)))
    return (local_now if now is None else now), tuple(readings)
