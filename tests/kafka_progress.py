"""Spark's recorded progress with a Kafka source in place of its own: Kafka cannot run here.

The source is shaped as Spark writes it: KafkaSourceOffset JSON ({topic: {partition: offset}})
for the offsets and KafkaMicroBatchStream.metrics (Long.toString for min/max, Double.toString
for the average) for the metrics.
"""

from __future__ import annotations

# Offsets behind head per batch id: batch k is 15k offsets behind (see with_kafka_source).
BEHIND_PER_BATCH = 15


def with_kafka_source(progress: list[dict]) -> list[dict]:
    """Spark's reports with their source swapped for a Kafka one, shaped as Spark writes it
    (KafkaSourceOffset JSON, KafkaMicroBatchStream.metrics): batch k ends at 100k and 50k in
    partitions 0 and 1 of "orders", whose heads are 10k and 5k further, so 15k offsets behind."""

    def kafka(k: int) -> dict:
        return {
            "description": "KafkaV2[Subscribe[orders]]",
            "startOffset": {"orders": {"1": 50 * k - 50, "0": 100 * k - 100}} if k else None,
            "endOffset": {"orders": {"1": 50 * k, "0": 100 * k}},
            "latestOffset": {"orders": {"1": 55 * k, "0": 110 * k}},
            "numInputRows": 0,
            "metrics": {
                "avgOffsetsBehindLatest": repr(7.5 * k),
                "maxOffsetsBehindLatest": str(10 * k),
                "minOffsetsBehindLatest": str(5 * k),
            },
        }

    return [{**p, "sources": [kafka(p["batchId"])]} for p in progress]
