"""Read a checkpoint's offset and commit logs back through Spark's own JVM classes.

This is the reference our pure-Python reader (`workers.checkpoint`) is compared with: nothing
here parses a checkpoint file; every value comes from Spark's deserializers, reached over py4j.

Classes used (Spark 4.1+ package layout; see docs/spark-checkpoint-formats.md):

* `checkpointing.OffsetSeqLog(session, path, readOnly)` -> `OffsetSeqBase` per batch
  (`metadataOpt()`, `offsets()` of `Option[Offset]`, `version()`);
* `checkpointing.CommitLog(session, path, readOnly)` -> `CommitMetadataBase` per batch
  (`nextBatchWatermarkMs()`, `version()`);
* `runtime.StreamMetadata.read(path, hadoopConf)` -> the query id in `<ckpt>/metadata`.

`readOnly=True` keeps Spark from creating a missing log directory (e.g. the commit log of a
Spark 2.1 checkpoint). Batch ids are taken from the files Spark lists (`getOrderedBatchFiles`),
not from `min..max`, so a log with a hole (Spark's `checkpoint-test-offsetId-commitId-inconsistent`)
is reported as it is. A batch file Spark fails to read is reported as
`{"batch_id": N, "error": "<Java exception>: <message>"}` instead of raising.

Run as a script to print the report of one or more checkpoints as JSON:
`python -m pipelines.spark_report CHECKPOINT [CHECKPOINT ...]`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from py4j.protocol import Py4JJavaError

CHECKPOINTING_PACKAGE = "org.apache.spark.sql.execution.streaming.checkpointing"
RUNTIME_PACKAGE = "org.apache.spark.sql.execution.streaming.runtime"


def read_spark_report(spark, checkpoint_path: str) -> dict[str, Any]:
    """Return what Spark reads from the checkpoint at `checkpoint_path`.

    `{"stream_metadata_id": str | None, "offset_log": [...], "commit_log": [...]}`, both logs
    sorted by batch id. Offsets entries: `batch_id`, `version`, `batch_watermark_ms`,
    `batch_timestamp_ms`, `conf` (the three metadata fields are `None`/`{}` when the entry has no
    metadata line), `offsets` (one JSON string or `None` per source). Commit entries:
    `batch_id`, `version`, `next_batch_watermark_ms`.
    """
    root = checkpoint_path.rstrip("/")
    return {
        "stream_metadata_id": read_stream_metadata_id(spark, root),
        "offset_log": _read_log(spark, "OffsetSeqLog", f"{root}/offsets", _offset_entry),
        "commit_log": _read_log(spark, "CommitLog", f"{root}/commits", _commit_entry),
    }


def read_stream_metadata_id(spark, checkpoint_path: str) -> str | None:
    """Return the query id Spark reads from `<checkpoint>/metadata`, or None when it is absent."""
    jvm = spark.sparkContext._jvm
    hadoop_conf = spark._jsparkSession.sessionState().newHadoopConf()
    path = jvm.org.apache.hadoop.fs.Path(f"{checkpoint_path}/metadata")
    metadata = getattr(jvm, RUNTIME_PACKAGE).StreamMetadata.read(path, hadoop_conf)
    return metadata.get().id() if metadata.isDefined() else None


def _read_log(spark, class_name: str, log_path: str, to_entry) -> list[dict[str, Any]]:
    log = getattr(spark.sparkContext._jvm, CHECKPOINTING_PACKAGE)
    log = getattr(log, class_name)(spark._jsparkSession, log_path, True)
    entries = []
    for batch_id in _listed_batch_ids(log):
        try:
            found = log.get(batch_id)
            if not found.isDefined():
                raise LookupError(f"Spark listed batch {batch_id} but get() returned None")
            entries.append({"batch_id": batch_id, **to_entry(spark, found.get())})
        except (Py4JJavaError, LookupError) as error:
            entries.append({"batch_id": batch_id, "error": _describe(error)})
    return entries


def _listed_batch_ids(log) -> list[int]:
    """Return the batch ids of the files Spark lists in the log directory (none if it is missing)."""
    try:
        statuses = log.getOrderedBatchFiles()
    except Py4JJavaError as error:
        if "FileNotFoundException" in error.java_exception.getClass().getName():
            return []
        raise
    return sorted(log.pathToBatchId(status.getPath()) for status in statuses)


def _offset_entry(spark, offset_seq) -> dict[str, Any]:
    metadata = offset_seq.metadataOpt()
    metadata = metadata.get() if metadata.isDefined() else None
    offsets = offset_seq.offsets()
    return {
        "version": offset_seq.version(),
        "batch_watermark_ms": metadata.batchWatermarkMs() if metadata else None,
        "batch_timestamp_ms": metadata.batchTimestampMs() if metadata else None,
        "conf": _scala_map_to_dict(spark, metadata.conf()) if metadata else {},
        "offsets": [_offset_json(offsets.apply(i)) for i in range(offsets.length())],
    }


def _offset_json(offset_option) -> str | None:
    return offset_option.get().json() if offset_option.isDefined() else None


def _commit_entry(spark, commit) -> dict[str, Any]:
    return {"version": commit.version(), "next_batch_watermark_ms": commit.nextBatchWatermarkMs()}


def _scala_map_to_dict(spark, scala_map) -> dict[str, str]:
    converters = spark.sparkContext._jvm.scala.jdk.javaapi.CollectionConverters
    return dict(sorted(converters.asJava(scala_map).items()))


def _describe(error: Exception) -> str:
    if isinstance(error, Py4JJavaError):
        return error.java_exception.toString()
    return str(error)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="checkpoint directories (paths or URIs)")
    args = parser.parse_args(argv)

    from pipelines.queries import build_session

    spark = build_session("ckptweb-spark-report", master="local[1]")
    try:
        reports = {path: read_spark_report(spark, path) for path in args.checkpoints}
    finally:
        spark.stop()
    json.dump(reports, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
