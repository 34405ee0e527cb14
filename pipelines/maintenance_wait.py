"""Wait for the files Spark's state-store maintenance leaves, before a fixture's query is stopped.

Spark writes state snapshots (`<v>.snapshot` in the HDFS-backed provider, `<v>.zip` uploads of
RocksDB with changelog checkpointing) and deletes old versions on a background thread that runs
every `maintenanceInterval`, apart from the batches. On a loaded machine that thread can lag the
batches by many seconds, so a query stopped after a fixed number of batches may hold no snapshot
yet, or still its first versions. The fixture generators therefore wait, bounded, for the files
the fixtures are meant to show, and fail naming the store and what it lacks.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# `<version>.<kind>`, or `<version>_<uuid>.<kind>` in checkpoint format 2.
_STATE_VERSION_FILE = re.compile(r"^(\d+)(_[0-9a-f-]{36})?\.(delta|snapshot|zip|changelog)$")
_SNAPSHOT_KINDS = frozenset({"snapshot", "zip"})
MAINTENANCE_TIMEOUT_SECONDS = 180


@dataclass(frozen=True)
class MaintenanceWanted:
    """What every state store must show: at least ``snapshots`` snapshot files (`.snapshot` or
    `.zip`), and no version below ``cleaned_below`` (0: no cleanup expected)."""

    snapshots: int
    cleaned_below: int = 0


def _versions_by_kind(store: Path) -> list[tuple[int, str]]:
    matches = (_STATE_VERSION_FILE.match(path.name) for path in store.iterdir())
    return [(int(match.group(1)), match.group(3)) for match in matches if match]


def state_store_dirs(checkpoint: Path) -> list[Path]:
    """Every directory holding the version files of one state store (operator, partition, store)."""
    return sorted({path.parent for path in (checkpoint / "state").rglob("*") if _STATE_VERSION_FILE.match(path.name)})


def maintenance_shortfall(checkpoint: Path, wanted: MaintenanceWanted) -> str | None:
    """What the state stores under ``checkpoint`` still lack of ``wanted``, or None if nothing."""
    stores = state_store_dirs(checkpoint)
    if not stores:
        return f"no state store files under {checkpoint / 'state'}"
    for store in stores:
        files = _versions_by_kind(store)
        snapshots = sum(1 for _, kind in files if kind in _SNAPSHOT_KINDS)
        if snapshots < wanted.snapshots:
            return f"{store} has {snapshots} snapshot file(s) of the {wanted.snapshots} expected"
        oldest = min(version for version, _ in files)
        if oldest < wanted.cleaned_below:
            return f"{store} still holds version {oldest} (cleanup to version {wanted.cleaned_below} expected)"
    return None


def wait_for_maintenance(
    checkpoint: Path,
    wanted: MaintenanceWanted,
    failure: Callable[[], str | None],
    timeout_seconds: float = MAINTENANCE_TIMEOUT_SECONDS,
) -> None:
    """Wait until Spark's maintenance has left ``wanted`` under ``checkpoint`` while the query runs.

    ``failure`` says why the query can no longer get there (it failed, its process exited), or None.
    """
    deadline = time.monotonic() + timeout_seconds
    while (missing := maintenance_shortfall(checkpoint, wanted)) is not None:
        if (reason := failure()) is not None:
            raise RuntimeError(f"waiting for Spark's state maintenance in {checkpoint}: {reason}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"Spark's state maintenance did not run in {timeout_seconds} s: {missing}")
        time.sleep(0.1)


MAINTENANCE_INTERVAL_CONF = "spark.sql.streaming.stateStore.maintenanceInterval"


def restart_state_store_maintenance(spark) -> None:
    """Stop Spark's state-store maintenance thread, so that the next stateful query starts it again
    with its own `maintenanceInterval`.

    Spark starts that thread once per JVM, with the interval of the first stateful query that loads
    a store (`StateStore.startMaintenanceIfNeeded`), and keeps it until the JVM's StateStore stops.
    In a session that runs many queries one after the other (the tests, the fixture generator), a
    query asking for maintenance every second after one that asked for every hour would otherwise
    wait an hour, and the reverse would get maintenance it meant to keep out. Call it only while no
    query of the session runs: it also unloads the loaded stores, as a stopped SparkContext does.
    """
    state_package = spark._jvm.org.apache.spark.sql.execution.streaming.state
    getattr(getattr(state_package, "StateStore$"), "MODULE$").stop()
