"""The streaming queries shared by the fixture generator and the demo pipeline.

Each `*_query` function takes a SparkSession and the query's base directory and returns a
`DataStreamWriter` with the checkpoint location and the sink already set; the caller chooses
the trigger and starts it. Layout under the base directory:

    <base>/checkpoint/          the checkpoint (what ckptweb reads)
    <base>/output/              file sink output, with its `_spark_metadata/` log
    <base>/input/               input files of a file source (written by the caller)

Sources are deterministic: `rate-micro-batch` derives every row from the batch's offset
(`rowsPerBatch`, `startTimestamp`, `advanceMillisPerBatch`), and the file source reads what
the caller writes, so two runs with the same batches see the same rows.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

# 2024-01-01T00:00:00Z: event time of the first rate row in the fixtures.
FIXTURE_START_MS = 1_704_067_200_000

# Errors only. PySpark's gateway counts as a shell: without a level for its logger Spark resets
# the root level to WARN and prints "Setting default log level" (Logging.initializeLogging).
LOG4J2_PROPERTIES = """\
rootLogger.level = error
logger.gw.name = org.apache.spark.api.python.PythonGatewayServer
logger.gw.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@dataclass(frozen=True)
class RateSpec:
    """Options of a `rate-micro-batch` source: rows and event-time step of every batch."""

    rows_per_batch: int
    start_ms: int
    advance_ms: int = 1000
    num_partitions: int = 2


def build_session(
    app_name: str,
    *,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    jvm_in_own_process_group: bool = False,
) -> SparkSession:
    """Start a quiet local SparkSession whose byproducts (warehouse, local dirs) go to a temp dir.

    The temp dir is removed when the Python process exits. With `jvm_in_own_process_group`
    the JVM gets its own session, so a SIGTERM sent to this process's group (a supervisor,
    `timeout`) reaches only Python, which can then stop the queries before the JVM; the JVM
    still exits when Python dies (PySpark's gateway watches its stdin). By default the JVM
    shares the process group, so killing the group kills the JVM too.
    """
    scratch = Path(tempfile.mkdtemp(prefix="ckptweb-spark-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark_conf = SparkConf().setMaster(master).setAppName(app_name)
    spark_conf.setAll({**_session_defaults(scratch), **(conf or {})}.items())
    if jvm_in_own_process_group:
        gateway = launch_gateway(spark_conf, popen_kwargs={"start_new_session": True})
        SparkContext(conf=spark_conf, gateway=gateway)
    spark = SparkSession.builder.config(conf=spark_conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _session_defaults(scratch: Path) -> dict[str, str]:
    log4j = scratch / "log4j2.properties"
    log4j.write_text(LOG4J2_PROPERTIES)
    java_options = [
        f"-Dlog4j2.configurationFile=file:{log4j}",
        f"-Dderby.system.home={scratch}",
        f"-Djava.io.tmpdir={scratch}",
    ]
    return {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.warehouse.dir": str(scratch / "spark-warehouse"),
        "spark.local.dir": str(scratch / "local"),
        "spark.driver.extraJavaOptions": " ".join(java_options),
    }


def stop_between_batches(query: StreamingQuery, timeout_seconds: float) -> None:
    """Stop `query` once no trigger is running (or after the timeout).

    `StreamingQuery.stop()` interrupts a running batch, leaving an offsets entry without a
    commit; waiting for an idle moment avoids that unless a trigger starts in between.
    """
    deadline = time.monotonic() + timeout_seconds
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.02)
    query.stop()


def rate_events(spark: SparkSession, spec: RateSpec) -> DataFrame:
    """Return a `rate-micro-batch` stream with columns `timestamp` and `value`."""
    return (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", spec.rows_per_batch)
        .option("numPartitions", spec.num_partitions)
        .option("startTimestamp", spec.start_ms)
        .option("advanceMillisPerBatch", spec.advance_ms)
        .load()
    )


def windowed_counts(events: DataFrame) -> DataFrame:
    """Count rate rows per 5-second event-time window and key (3 keys), 2-second watermark."""
    return (
        events.withColumn("key", F.concat(F.lit("k"), (F.col("value") % 3).cast("string")))
        .withWatermark("timestamp", "2 seconds")
        .groupBy(F.window("timestamp", "5 seconds"), "key")
        .count()
    )


def deduplicated(events: DataFrame) -> DataFrame:
    """Drop rows whose (`id`, `event_time`) was already seen, with a 10-second watermark."""
    return events.withWatermark("event_time", "10 seconds").dropDuplicates(["id", "event_time"])


def joined_streams(left_events: DataFrame, right_events: DataFrame) -> DataFrame:
    """Inner-join two rate streams on a key within 2 seconds of event time (both watermarked)."""
    left = left_events.select(
        F.col("value").alias("left_id"),
        (F.col("value") % 5).alias("left_key"),
        F.col("timestamp").alias("left_time"),
    ).withWatermark("left_time", "2 seconds")
    right = right_events.select(
        F.col("value").alias("right_id"),
        (F.col("value") % 5).alias("right_key"),
        F.col("timestamp").alias("right_time"),
    ).withWatermark("right_time", "3 seconds")
    condition = F.expr("left_key = right_key AND right_time BETWEEN left_time AND left_time + INTERVAL 2 SECONDS")
    return left.join(right, condition, "inner")


def file_events(spark: SparkSession, input_dir: Path) -> DataFrame:
    """Return a JSON file stream of `id`, `event_time`, `value`, one input file per batch."""
    return (
        spark.readStream.schema("id STRING, event_time TIMESTAMP, value INT")
        .option("maxFilesPerTrigger", 1)
        .json(str(input_dir))
    )


def json_file_sink(frame: DataFrame, base: Path, name: str, **options: str) -> DataStreamWriter:
    """Write `frame` in append mode as JSON to `<base>/output`, checkpointed in `<base>/checkpoint`."""
    writer = (
        frame.writeStream.queryName(name)
        .format("json")
        .outputMode("append")
        .option("path", str(base / "output"))
        .option("checkpointLocation", str(base / "checkpoint"))
    )
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer


def noop_sink(frame: DataFrame, base: Path, name: str) -> DataStreamWriter:
    """Discard `frame`'s rows (append mode), checkpointed in `<base>/checkpoint`: only state matters."""
    return (
        frame.writeStream.queryName(name)
        .format("noop")
        .outputMode("append")
        .option("checkpointLocation", str(base / "checkpoint"))
    )


def windowed_agg_noop_query(spark: SparkSession, base: Path, name: str, spec: RateSpec) -> DataStreamWriter:
    """rate-micro-batch -> watermark -> groupBy(window, key).count() -> noop sink, named `name`."""
    return noop_sink(windowed_counts(rate_events(spark, spec)), base, name)


def rate_dedup_noop_query(spark: SparkSession, base: Path, name: str, spec: RateSpec) -> DataStreamWriter:
    """rate-micro-batch (ids repeat every 7 rows) -> watermark -> dropDuplicates -> noop sink."""
    return noop_sink(deduplicated(rate_dedup_events(spark, spec)), base, name)


def stream_stream_join_noop_query(
    spark: SparkSession, base: Path, name: str, left: RateSpec, right: RateSpec
) -> DataStreamWriter:
    """Two rate-micro-batch streams -> watermarks -> time-bounded inner join -> noop sink, named `name`."""
    return noop_sink(joined_streams(rate_events(spark, left), rate_events(spark, right)), base, name)


def rate_limit_noop_query(spark: SparkSession, base: Path, name: str, spec: RateSpec, limit: int) -> DataStreamWriter:
    """rate-micro-batch -> streaming `limit(limit)` (its state: rows let through so far) -> noop sink."""
    return noop_sink(rate_events(spark, spec).limit(limit), base, name)


def windowed_agg_file_sink_query(
    spark: SparkSession, base: Path, spec: RateSpec, **sink_options: str
) -> DataStreamWriter:
    """rate-micro-batch -> watermark -> groupBy(window, key).count() -> JSON file sink."""
    counts = windowed_counts(rate_events(spark, spec))
    return json_file_sink(counts, base, "windowed_agg_file_sink", **sink_options)


def file_source_dedup_query(spark: SparkSession, base: Path, **sink_options: str) -> DataStreamWriter:
    """JSON files in `<base>/input` -> watermark -> dropDuplicates -> JSON file sink."""
    rows = deduplicated(file_events(spark, base / "input"))
    return json_file_sink(rows, base, "file_source_dedup", **sink_options)


def rate_dedup_events(spark: SparkSession, spec: RateSpec) -> DataFrame:
    """rate-micro-batch rows as `id` (repeating every 7 rows), `event_time` (whole seconds), `value`."""
    return rate_events(spark, spec).select(
        F.concat(F.lit("e"), (F.col("value") % 7).cast("string")).alias("id"),
        F.date_trunc("second", F.col("timestamp")).alias("event_time"),
        F.col("value").cast("int").alias("value"),
    )


def rate_dedup_query(spark: SparkSession, base: Path, spec: RateSpec, **sink_options: str) -> DataStreamWriter:
    """rate-micro-batch (ids repeat every 7 rows) -> watermark -> dropDuplicates -> JSON file sink."""
    return json_file_sink(deduplicated(rate_dedup_events(spark, spec)), base, "rate_dedup", **sink_options)


def stream_stream_join_query(
    spark: SparkSession, base: Path, left: RateSpec, right: RateSpec, **sink_options: str
) -> DataStreamWriter:
    """Two rate-micro-batch streams -> watermarks -> time-bounded inner join -> JSON file sink."""
    joined = joined_streams(rate_events(spark, left), rate_events(spark, right))
    return json_file_sink(joined, base, "stream_stream_join", **sink_options)


def windowed_agg_foreach_batch_query(
    spark: SparkSession, base: Path, name: str, spec: RateSpec, on_batch
) -> DataStreamWriter:
    """rate-micro-batch -> windowed counts -> `foreachBatch(on_batch)` (update mode), named `name`."""
    counts = windowed_counts(rate_events(spark, spec))
    return (
        counts.writeStream.queryName(name)
        .outputMode("update")
        .option("checkpointLocation", str(base / "checkpoint"))
        .foreachBatch(on_batch)
    )
