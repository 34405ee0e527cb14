"""Which batch the state panel's figures are from, and how far behind the query that is.

The state figures move when a sync stores newly committed batches (workers.state_follow reads the
new versions' files; on an object store at most once per CKPTWEB_STATE_FOLLOW_MIN_SECONDS) and
with the full pass (every CKPTWEB_INSPECT_INTERVAL_SECONDS). Either can fall behind the query (a
sync that fails, a follow held back, a version Spark has not finished): a panel that does not say
so shows a stale figure as current. Spark's state store
version N holds the state after batch N - 1 (HDFSBackedStateStoreProvider and RocksDB alike:
batch b commits version b + 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class StateAsOf:
    read_at: datetime | None  # when the newest of the panel's partition rows was written
    version: int | None
    batch_id: int | None
    latest_batch_id: int | None

    @classmethod
    def of(cls, checkpoint, stores: Sequence, read_at: datetime | None) -> StateAsOf:
        versions = [store.latest_version for store in stores if store.latest_version is not None]
        version = max(versions) if versions else None
        return cls(read_at, version, None if version is None else version - 1, checkpoint.latest_batch_id)

    @property
    def batches_behind(self) -> int:
        """Batches the query planned after the one whose state is shown (0 when current or unknown)."""
        if self.batch_id is None or self.latest_batch_id is None:
            return 0
        return max(self.latest_batch_id - self.batch_id, 0)
