"""Read a file source or file sink log back through Spark's own CompactibleFileStreamLog classes.

The reference for `workers.checkpoint.metadatalog`: every value comes from Spark over py4j —
`FileStreamSinkLog` / `FileStreamSourceLog` (Spark 4.1+ packages `sinks` / `runtime`) derive the
compact interval from the files (`compactInterval`), name each batch's file (`batchIdToPath`:
`N` or `N.compact`) and list the live entries (`allFiles`).
"""

from __future__ import annotations

from typing import Any

SINK_LOG_CLASS = "org.apache.spark.sql.execution.streaming.sinks.FileStreamSinkLog"
SOURCE_LOG_CLASS = "org.apache.spark.sql.execution.streaming.runtime.FileStreamSourceLog"
LOG_VERSION = 1


def read_spark_metadata_log(spark, log_path: str, kind: str) -> dict[str, Any]:
    """Return what Spark makes of the log at `log_path` (`kind` "sink" or "source").

    `{"compact_interval", "latest_batch", "compact_batches", "live_entries"}`; `compact_batches`
    are the listed batches whose file Spark names `N.compact`.
    """
    log = _open_log(spark, log_path, kind)
    listed = sorted(log.listBatches())
    latest = log.getLatestBatchId()
    return {
        "compact_interval": log.compactInterval(),
        "latest_batch": latest.get() if latest.isDefined() else None,
        "compact_batches": [b for b in listed if log.batchIdToPath(b).getName().endswith(".compact")],
        "live_entries": len(log.allFiles()),
    }


def _open_log(spark, log_path: str, kind: str):
    class_name = {"sink": SINK_LOG_CLASS, "source": SOURCE_LOG_CLASS}[kind]
    jvm_class = spark.sparkContext._jvm
    for part in class_name.split("."):
        jvm_class = getattr(jvm_class, part)
    if kind == "sink":
        none = spark.sparkContext._jvm.scala.Option.empty()
        return jvm_class(LOG_VERSION, spark._jsparkSession, log_path, none)
    return jvm_class(LOG_VERSION, spark._jsparkSession, log_path)
