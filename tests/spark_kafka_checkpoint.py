"""Spark's own Kafka checkpoint offsets, rebuilt byte for byte, for the skip (b) tests.

`offsets/0` of apache/spark's connector/kafka-0-10-sql/src/test/resources/structured-streaming/
checkpoint-version-2.4.3-kafka-include-headers-default (one topic of five partitions, written by
KafkaSourceOffset: partition keys in hash-map order): its metadata line and its source line, 494
bytes with the "v1" line, no newline at the end. Compared with Spark's file (apache/spark commit
53943365237dcd8aa7b9ea9b7de11fa472654ab4, then under external/kafka-0-10-sql/): the same bytes;
SPARK_OFFSETS_0_SHA256 is that file's digest, which the unit tests check the rebuilt bytes against.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

TOPIC = "spark-test-topic-2b8619f5-d3c4-4c2d-b5d1-8d9d9458aa62"
SPARK_KAFKA_METADATA = (
    '{"batchWatermarkMs":0,"batchTimestampMs":1568508285207,"conf":{'
    '"spark.sql.streaming.stateStore.providerClass":'
    '"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",'
    '"spark.sql.streaming.flatMapGroupsWithState.stateFormatVersion":"2",'
    '"spark.sql.streaming.multipleWatermarkPolicy":"min",'
    '"spark.sql.streaming.aggregation.stateFormatVersion":"2","spark.sql.shuffle.partitions":"5"}}'
)
SPARK_KAFKA_OFFSETS = '{"' + TOPIC + '":{"2":3,"4":3,"1":3,"3":3,"0":3}}'
SPARK_OFFSETS_0_SHA256 = "ebd585c411d6d187e887bf0a281f6c2c89c7015681b29aa0b989e2ac310f692d"
# Where the failed batch 1 would have ended.
BATCH_1_OFFSETS = '{"' + TOPIC + '":{"2":9,"4":4,"1":7,"3":3,"0":12}}'


def spark_offsets_0() -> str:
    return "\n".join(("v1", SPARK_KAFKA_METADATA, SPARK_KAFKA_OFFSETS))


def write_file(root: Path, relpath: str, text: str) -> None:
    path = root / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())


def write_kafka_checkpoint(root: Path) -> Path:
    """Spark's batch 0, committed, and an uncommitted batch 1 that fails at every restart."""
    write_file(root, "metadata", '{"id":"1d5b6b0f-6a6b-4d1e-9b1b-000000000027"}')
    write_file(root, "offsets/0", spark_offsets_0())
    write_file(root, "commits/0", 'v1\n{"nextBatchWatermarkMs":0}')
    write_file(root, "offsets/1", "\n".join(("v1", SPARK_KAFKA_METADATA, BATCH_1_OFFSETS)))
    return root


def as_kafka_source_offset(line: str) -> dict[str, dict[int, int]]:
    """The map JsonUtils.partitionOffsets reads (Map[String, Map[Int, Long]]) from compact JSON."""
    assert re.fullmatch(r'\{("[^"]+":\{("[0-9]+":-?[0-9]+,?)+\},?)+\}', line), line
    parsed = json.loads(line)
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in parsed.items()}
