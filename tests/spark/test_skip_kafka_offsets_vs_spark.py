"""Skip (b) of a Kafka partition, read back by Spark: the offsets file our skip rewrote, through
Spark's own OffsetSeqLog (checkpointing.OffsetSeqLog of the installed PySpark).

Spark's Kafka connector (spark-sql-kafka-0-10, whose KafkaSourceOffset and JsonUtils parse the
source's JSON) is not in PySpark and cannot be installed here (no Maven repository is reachable:
docs/maintenance.md, skip), so the source line Spark hands back is parsed as JsonUtils reads it
(topic -> partition number -> long) by `as_kafka_source_offset`. What Spark itself checks here: the
file's version line, its metadata line (OffsetSeqMetadata, conf kept) and one source line, handed
back byte for byte.
"""

from __future__ import annotations

import pytest

from spark_kafka_checkpoint import TOPIC, as_kafka_source_offset, write_kafka_checkpoint
from workers.checkpoint.maintenance.skip import apply_skip, plan_skip
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

pytestmark = pytest.mark.spark

LATER = 4_000_000_000.0


def _spark_reads_offsets(spark, offsets_dir, batch: int):
    """(metadata JSON, [source JSON]) of offsets/<batch> as Spark's OffsetSeqLog reads it."""
    checkpointing = spark._jvm.org.apache.spark.sql.execution.streaming.checkpointing
    log = checkpointing.OffsetSeqLog(spark._jsparkSession, str(offsets_dir), False)
    read = log.get(batch)
    assert read.isDefined(), f"Spark's OffsetSeqLog finds no offsets/{batch} in {offsets_dir}"
    seq = read.get()
    offsets = seq.offsets()
    sources = [offsets.apply(i).get().json() for i in range(offsets.size())]
    return seq.metadataOpt().get().json(), sources


def _plan_after(plan) -> str:
    prefix = "offsets/1 source 0 after: "
    return next(note[len(prefix) :] for note in plan.notes if note.startswith(prefix))


def test_spark_reads_back_the_skipped_partition_at_its_new_start_and_the_others_unchanged(spark, tmp_path):
    root = write_kafka_checkpoint(tmp_path / "checkpoint")
    metadata_before, (start,) = _spark_reads_offsets(spark, root / "offsets", 0)
    storage = CheckpointStorage(str(root))
    plan = plan_skip(storage, now=LATER, source=0, partition=f"{TOPIC}-2", to_offset=8)
    assert plan.is_allowed(), plan.failed_preconditions()

    apply_skip(storage, plan)

    metadata, (rewritten,) = _spark_reads_offsets(spark, root / "offsets", 1)
    assert metadata == metadata_before
    assert rewritten == _plan_after(plan)
    spark_start = as_kafka_source_offset(start)[TOPIC]
    assert as_kafka_source_offset(rewritten) == {TOPIC: {**spark_start, 2: 8}}
    assert spark_start == {0: 3, 1: 3, 2: 3, 3: 3, 4: 3}
