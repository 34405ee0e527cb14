"""Operators Spark runs on one partition: their state has partition 0 only, and Spark restarts them.

A streaming ``limit`` (StreamingGlobalLimitExec) and an aggregation without grouping keys require
AllTuples, so their state lives in ``state/<op>/0`` whatever ``spark.sql.shuffle.partitions``
says. Each query here runs, is restarted by Spark from its checkpoint (which must work), and the
integrity check must then report no error for the partitions Spark never wrote.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipelines.generate_fixtures import session_conf
from workers.checkpoint.integrity.gather import check_checkpoint
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

SHUFFLE_PARTITIONS = 3
PROVIDERS = {
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


def _limit(frame):
    return frame.limit(3), "append"


def _global_count(frame):
    return frame.groupBy().count(), "update"


def _write_input(folder: Path, index: int) -> None:
    folder.mkdir(exist_ok=True)
    rows = "".join(json.dumps({"v": f"row-{index}-{n}"}) + "\n" for n in range(5))
    (folder / f"part-{index}.json").write_text(rows)


def _run_once(spark, tmp_path: Path, build) -> None:
    """Process what is in the input folder, restarting from the checkpoint if there is one."""
    result, mode = build(spark.readStream.schema("v string").json(str(tmp_path / "input")))
    query = (
        result.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None


@pytest.mark.parametrize(
    ("build", "provider"),
    [(_limit, "hdfs"), (_limit, "rocksdb"), (_global_count, "hdfs"), (_global_count, "rocksdb")],
    ids=["limit-hdfs", "limit-rocksdb", "global-count-hdfs", "global-count-rocksdb"],
)
def test_a_one_partition_operator_that_spark_restarts_has_no_error(spark, tmp_path, build, provider):
    conf = {
        "spark.sql.shuffle.partitions": str(SHUFFLE_PARTITIONS),
        "spark.sql.streaming.stateStore.providerClass": PROVIDERS[provider],
    }
    with session_conf(spark, conf):
        _write_input(tmp_path / "input", 0)
        _run_once(spark, tmp_path, build)
        _write_input(tmp_path / "input", 1)
        _run_once(spark, tmp_path, build)  # Spark restarts from the checkpoint: it accepts it

    partitions = sorted(p.name for p in (tmp_path / "checkpoint/state/0").iterdir() if p.name.isdigit())
    assert partitions == ["0"]
    findings = check_checkpoint(CheckpointStorage(str(tmp_path / "checkpoint")))
    assert [(f.code, f.path) for f in findings if f.severity == "error"] == []
