"""read_state_size on states big enough for its bulk paths, written by real PySpark: rows per
partition equal Spark's `statestore` source, and rows and bytes equal a record-by-record replay.

The states come from the benchmark's builder (bench/state_rows.py) at a small scale, in its own
process: a dedup with watermark eviction, so the deltas hold long runs of puts and of removals;
with fixed-width keys (long runs), variable-width keys (sizes change from record to record) and
snapshots written by maintenance (the builder keeps the query running until every partition has a
snapshot and some version is a snapshot plus deltas in every partition, and fails saying which is
missing if maintenance writes neither; partitions whose snapshots never share a version are each
compared at their own).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from bench.state_rows import (
    latest_versions,
    partitions_by_version,
    snapshot_and_deltas_versions,
    snapshot_only_versions,
)
from workers.checkpoint.logdir import list_batch_ids
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.statefiles import iter_state_records
from workers.checkpoint.stateinventory import files_for_version, list_state_store_dirs, parse_hdfs_state_files
from workers.checkpoint.staterows import StateSize, read_state_size
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark
ROWS_PER_BATCH = 4000


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    base = tmp_path_factory.mktemp("bench-states")
    code = (
        "import sys; from pathlib import Path\n"
        "from bench.state_rows import VARIANTS, build_state\n"
        "for name in VARIANTS: build_state(Path(sys.argv[1]) / name, VARIANTS[name], int(sys.argv[2]))\n"
    )
    built = subprocess.run([sys.executable, "-c", code, str(base), str(ROWS_PER_BATCH)], capture_output=True, text=True)
    assert built.returncode == 0, f"building the states with PySpark failed:\n{_python_error(built.stderr)}"
    return {path.name: path / "checkpoint" for path in base.iterdir()}


def _python_error(stderr: str) -> str:
    """The builder's own traceback: Spark's log lines of a JVM that outlives the error follow it."""
    start = stderr.rfind("Traceback (most recent call last)")
    return stderr[start : start + 6000] if start >= 0 else stderr[-4000:]


def _replayed_size(storage, store, version: int) -> StateSize:
    """loadMap the slow way: every record of the chain applied to a dict."""
    rows: dict[bytes, bytes] = {}
    for state_file in files_for_version(parse_hdfs_state_files(store.files)[0], version):
        source = f"{store.path}/{state_file.name}"
        raw = decompress_state_file(storage.read_bytes(source), source=source, codec="lz4")
        for record in iter_state_records(raw, source=source):
            if record.is_removal:
                rows.pop(record.key, None)
            else:
                rows[record.key] = record.value
    return StateSize(len(rows), sum(map(len, rows)), sum(map(len, rows.values())))


def _spark_rows(spark, root, batch_id: int) -> dict[int, int]:
    frame = spark.read.format("statestore").option("batchId", batch_id).load(str(root))
    return {row["partition_id"]: row["count"] for row in frame.groupBy("partition_id").count().collect()}


def _version_choices(root, variant: str) -> list[dict[int, int]]:
    """{partition: version} at the last two committed versions, and for the snapshot variants at
    the versions the bench measures as "snapshot only" and "snapshot + deltas"."""
    previous = list_batch_ids(CheckpointStorage(str(root)), "commits")[-2] + 1
    choices = [{partition: previous for partition in latest_versions(root)}, latest_versions(root)]
    if variant in ("snapshot", "variable-snapshot"):
        choices += [snapshot_only_versions(root), snapshot_and_deltas_versions(root)]
    return choices


@pytest.mark.parametrize("variant", ["fixed", "variable", "snapshot", "variable-snapshot"])
def test_rows_and_bytes_equal_spark_and_a_record_by_record_replay(spark, states, variant):
    root = states[variant]
    storage = CheckpointStorage(str(root))
    stores = list_state_store_dirs(storage)
    for versions in _version_choices(root, variant):
        sizes = {store.partition: read_state_size(storage, store, versions[store.partition]) for store in stores}
        for version, partitions in partitions_by_version(versions).items():
            theirs = {p: rows for p, rows in _spark_rows(spark, root, version - 1).items() if p in partitions}
            assert {p: sizes[p].rows for p in partitions if sizes[p].rows} == theirs, version
        for store in stores:
            version = versions[store.partition]
            assert sizes[store.partition] == _replayed_size(storage, store, version), (version, store.path)


def test_the_fixed_width_deltas_hold_long_runs_of_puts_and_of_removals(states):
    """The comparisons above reach the bulk paths only if the files have this shape."""
    store = list_state_store_dirs(CheckpointStorage(str(states["fixed"])))[0]
    last = max(f.version for f in parse_hdfs_state_files(store.files)[0])
    raw = decompress_state_file((states["fixed"] / store.path / f"{last}.delta").read_bytes(), source="d", codec="lz4")
    kinds = [record.is_removal for record in iter_state_records(raw, source="d")]
    # Spark writes a batch's puts, then the evictions: two runs of 40-byte keys, mostly.
    assert kinds.count(False) > 100 and kinds.count(True) > 100 and kinds == sorted(kinds)
