"""Skip, proven by Spark: a batch with a poison row fails at every restart; after the skip it does not.

One deterministic query: a JSON file source -> dropDuplicates("id") (HDFS-backed state) -> a Python
UDF that raises on the marker value -> a JSON file sink, each run a Trigger.AvailableNow run over the
files added before it (one batch a run). The rows Spark writes are read back through the sink log.

* skip (a): the batch with the poison file fails twice; skipped, the query restarts, the output lacks
  exactly that batch's rows, and a later batch is deduplicated against the state before the skipped
  batch (an id only the skipped batch had comes out; an id of an earlier batch does not).
* skip (b), file source, state in RocksDB with changelog checkpointing: a batch of a poison file and
  a good file fails; with only the poison file skipped the restart writes the good file's rows and
  none of the poison file's, and a later row with an id of the poison file comes out.
* undo of either skip (backed up): the query directory is byte for byte as a copy made before
  the skip (the backup directory aside), and Spark's restart fails on the poison row again.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from pipelines.generate_fixtures import session_conf
from spark.maintenance_files import tree_differences
from spark.restart import DEFAULT_TEST_CONF, read_output_rows
from workers.checkpoint.maintenance.actions import apply_action, plan_action
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

MARKER = "poison"
# Skip (b)'s query keeps its state in RocksDB with changelog checkpointing (skip (a)'s in the HDFS
# provider): the carried-forward version is then an empty changelog.
ROCKSDB_CHANGELOG = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}


def _query(spark, base: Path):
    from pyspark.sql import functions as F  # noqa: N812 (PySpark's own convention)

    def fail_on_marker(value):
        if value == "poison":
            raise ValueError("poison row")
        return value

    check = F.udf(fail_on_marker, "string")
    rows = spark.readStream.schema("id STRING, v STRING").json(str(base / "input"))
    out = rows.dropDuplicates(["id"]).select("id", check("v").alias("v"))
    return (
        out.writeStream.format("json")
        .option("checkpointLocation", str(base / "checkpoint"))
        .option("path", str(base / "output"))
        .trigger(availableNow=True)
    )


def _add_file(base: Path, name: str, rows: list[tuple[str, str]]) -> None:
    (base / "input").mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps({"id": i, "v": v}) for i, v in rows)
    (base / "input" / f".{name}.tmp").write_text(text)
    (base / "input" / f".{name}.tmp").rename(base / "input" / name)  # the source never sees half a file


def _run(spark, base: Path, conf: dict[str, str] | None = None) -> str | None:
    """One AvailableNow run to its end; the error it failed with, or None."""
    with session_conf(spark, {**DEFAULT_TEST_CONF, **(conf or {})}):
        query = _query(spark, base).start()
    try:
        query.awaitTermination(300)
    except Exception as exc:  # StreamingQueryException: the run failed, which is what we look at
        return str(exc)
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        return str(query.exception())
    return None


def _skip(base: Path, parameters: dict) -> None:
    storage, sink = CheckpointStorage(str(base / "checkpoint")), CheckpointStorage(str(base / "output"))
    # The failed run wrote its files a moment ago: the query is known to be stopped here.
    plan = plan_action("skip", storage, parameters, now=time.time(), quiet_seconds=0, sink_storage=sink)
    assert plan.is_allowed(), plan.failed_preconditions()
    apply_action(storage, plan, parameters, sink_storage=sink)


def _skip_undone_as_before(spark, base: Path, parameters: dict, conf: dict[str, str] | None = None) -> None:
    """Skip with a backup, undo: the query directory is byte for byte as before and fails on the poison row again."""
    before = base.parent / f"{base.name}-before-skip"
    shutil.copytree(base, before, symlinks=True)
    backup = {"backup_dir": "_ckptweb_backup/skip-undone"}
    _skip(base, {**parameters, **backup})
    storage, sink = CheckpointStorage(str(base / "checkpoint")), CheckpointStorage(str(base / "output"))
    # The skip wrote the batch's commit a moment ago; the clock a second ahead sees the query stopped.
    undo = plan_action("undo", storage, backup, now=time.time() + 1, quiet_seconds=0, sink_storage=sink)
    assert undo.is_allowed() and undo.writes, (undo.summary, undo.failed_preconditions())
    apply_action(storage, undo, backup, sink_storage=sink)
    assert tree_differences(before, base) == []
    assert "poison row" in (_run(spark, base, conf) or "")


def _ids(spark, base: Path) -> list[tuple[str, str]]:
    return sorted((row["id"], row["v"]) for row in map(json.loads, read_output_rows(spark, base)))


def _shuffle_partition(spark, key: str) -> int:
    """The partition of 2 that dropDuplicates' shuffle sends ``key`` to (HashPartitioning: Murmur3, seed 42)."""
    return spark.sql("SELECT pmod(hash(?), 2) AS p", args=[key]).first()["p"]


def test_a_skipped_poison_batch_lets_the_query_go_on_with_the_state_before_it(spark, tmp_path):
    ids = [f"k{n}" for n in range(12)]
    by_partition = {p: [key for key in ids if _shuffle_partition(spark, key) == p] for p in (0, 1)}
    # Partition 0's task commits its version 2 before partition 1's fails on the poison row: the
    # skip must overwrite that delta, or its rows would count as seen.
    good, poison = by_partition[0][:2], by_partition[1][0]
    _add_file(tmp_path, "f0.json", [("a", "1"), ("b", "1")])
    _add_file(tmp_path, "f1.json", [("c", "1")])
    assert _run(spark, tmp_path) is None
    _add_file(tmp_path, "f2.json", [(good[0], "2"), (poison, MARKER), (good[1], "2")])
    for _ in range(2):  # at every restart
        error = _run(spark, tmp_path)
        assert error is not None and "poison row" in error
    checkpoint = tmp_path / "checkpoint"
    assert not (checkpoint / "commits/1").exists() and (checkpoint / "offsets/1").exists()
    assert (checkpoint / "state/0/0/2.delta").exists(), "partition 0 did not commit before the failure"

    _skip_undone_as_before(spark, tmp_path, {"batch": 1})
    _skip(tmp_path, {"batch": 1})
    _add_file(tmp_path, "f3.json", [("a", "3"), (good[0], "3"), (good[1], "3"), ("i", "3")])
    assert _run(spark, tmp_path) is None

    # No row of f2; "a" was seen before the skipped batch, the good ids only in it.
    expected = [("a", "1"), ("b", "1"), ("c", "1"), (good[0], "3"), (good[1], "3"), ("i", "3")]
    assert _ids(spark, tmp_path) == sorted(expected)
    assert (checkpoint / "commits/2").exists()


def test_skipping_the_poison_file_of_a_batch_keeps_its_other_file(spark, tmp_path):
    _add_file(tmp_path, "f0.json", [("a", "1")])
    assert _run(spark, tmp_path, ROCKSDB_CHANGELOG) is None
    _add_file(tmp_path, "f1.json", [("b", MARKER), ("c", "1")])
    _add_file(tmp_path, "f2.json", [("d", "2"), ("e", "2")])
    assert "poison row" in (_run(spark, tmp_path, ROCKSDB_CHANGELOG) or "")
    assert list((tmp_path / "checkpoint/state/0/0").glob("*.changelog")), "not a RocksDB changelog checkpoint"

    skipped = {"source": 0, "files": [str(tmp_path / "input" / "f1.json")]}
    _skip_undone_as_before(spark, tmp_path, skipped, ROCKSDB_CHANGELOG)
    _skip(tmp_path, skipped)
    assert _run(spark, tmp_path, ROCKSDB_CHANGELOG) is None

    assert _ids(spark, tmp_path) == [("a", "1"), ("d", "2"), ("e", "2")]
    _add_file(tmp_path, "f3.json", [("c", "3"), ("f", "3")])  # f1 never entered the state
    assert _run(spark, tmp_path, ROCKSDB_CHANGELOG) is None
    assert _ids(spark, tmp_path) == [("a", "1"), ("c", "3"), ("d", "2"), ("e", "2"), ("f", "3")]
