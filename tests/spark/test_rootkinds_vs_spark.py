"""What Spark leaves behind for a query that started but ran no batch: accepted, with a warning.

The rule of workers.checkpoint.rootkinds (metadata, offsets/ and commits/ exist from the start;
offsets/<N> only once a batch is planned; a file sink's _spark_metadata from the start) is read
off a real query here: a file source on an empty folder never plans a batch.
"""

from __future__ import annotations

import pytest

from workers.checkpoint.rootkinds import RootKind, SinkOutputKind, classify_checkpoint_root, classify_sink_output
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark


def test_a_query_stopped_before_its_first_batch_is_a_checkpoint_not_started_with_a_sink_log(spark, tmp_path):
    (tmp_path / "input").mkdir()
    query = (
        spark.readStream.schema("v string")
        .json(str(tmp_path / "input"))
        .writeStream.format("json")
        .option("path", str(tmp_path / "output"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        query.processAllAvailable()  # returns once a trigger found nothing to do
    finally:
        query.stop()

    root = classify_checkpoint_root(CheckpointStorage(str(tmp_path / "checkpoint")))
    assert (root.kind, root.found) == (RootKind.NOT_STARTED, ("commits", "metadata", "offsets"))
    assert classify_sink_output(CheckpointStorage(str(tmp_path / "output"))).kind is SinkOutputKind.SINK_LOG
