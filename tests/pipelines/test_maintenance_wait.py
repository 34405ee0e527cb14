"""The fixture generators' wait for Spark's state maintenance names what a store still lacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.maintenance_wait import MaintenanceWanted, maintenance_shortfall, wait_for_maintenance

UUID = "f058c341-7941-45f8-ad77-48ab3ee81434"


def _store(checkpoint: Path, partition: int, names: list[str]) -> Path:
    store = checkpoint / "state" / "0" / str(partition)
    store.mkdir(parents=True)
    for name in names:
        (store / name).write_bytes(b"")
    return store


def test_a_store_without_a_snapshot_is_named(tmp_path):
    _store(tmp_path, 0, ["1.delta", "2.delta", "2.snapshot"])
    bare = _store(tmp_path, 1, ["1.delta", "2.delta", ".2.delta.crc"])

    assert maintenance_shortfall(tmp_path, MaintenanceWanted(snapshots=1)) == (
        f"{bare} has 0 snapshot file(s) of the 1 expected"
    )


def test_rocksdb_zips_of_both_checkpoint_formats_count_as_snapshots(tmp_path):
    _store(tmp_path, 0, ["8.zip", "9.changelog", "10.zip"])
    _store(tmp_path, 1, [f"8_{UUID}.zip", f"9_{UUID}.changelog", f"10_{UUID}.zip"])

    assert maintenance_shortfall(tmp_path, MaintenanceWanted(snapshots=2, cleaned_below=6)) is None


def test_a_version_below_the_cleanup_is_named(tmp_path):
    store = _store(tmp_path, 0, ["5.delta", "6.delta", "6.snapshot"])

    assert maintenance_shortfall(tmp_path, MaintenanceWanted(snapshots=1, cleaned_below=6)) == (
        f"{store} still holds version 5 (cleanup to version 6 expected)"
    )


def test_no_state_at_all_is_a_shortfall(tmp_path):
    assert maintenance_shortfall(tmp_path, MaintenanceWanted(snapshots=1)).startswith("no state store files under")


def test_the_wait_stops_at_once_when_the_query_failed(tmp_path):
    _store(tmp_path, 0, ["1.delta"])

    with pytest.raises(RuntimeError, match="query q failed: boom"):
        wait_for_maintenance(tmp_path, MaintenanceWanted(snapshots=1), lambda: "query q failed: boom")


def test_the_wait_is_bounded_and_says_what_is_missing(tmp_path):
    store = _store(tmp_path, 0, ["1.delta"])

    with pytest.raises(TimeoutError, match=f"did not run in 0 s: {store} has 0 snapshot"):
        wait_for_maintenance(tmp_path, MaintenanceWanted(snapshots=1), lambda: None, timeout_seconds=0)
