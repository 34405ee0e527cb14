"""Generate the Spark-written event logs under tests/fixtures/event_logs/.

    python -m pipelines.generate_event_log_fixture OUT_DIR [--only NAME ...]

Each run is its own Spark application (the event log belongs to the SparkContext), running a
few batches of a small stateful query: `rate-micro-batch` -> 2 s watermark -> windowed counts
-> `noop` sink, in update mode. Every run writes

    OUT_DIR/<name>/                the spark.eventLog.dir of the run, exactly as Spark left it
    OUT_DIR/<name>-report.json     what the query itself reported (see `write_run_report`)

The two runs, as name: event-log settings; what Spark writes:

- `rolling_zstd`: Spark 4 defaults (rolling, compressed, zstd);
  `eventlog_v2_<appId>/events_1_<appId>.zstd` + `appstatus_<appId>`
- `plain`: `rolling.enabled=false`, `compress=false`, the four bulkiest event kinds excluded;
  one plain-text file `<appId>`

`--only single_lz4` also runs a third application, not committed: one LZ4-compressed file
`<appId>.lz4` (`rolling.enabled=false`, `compression.codec=lz4`); the Spark-marked tests use it.

Spark's smallest rolling size is 2 MiB of uncompressed events, so a short run writes one
`events_1` file; tests make more by splitting it at the zstd frame boundaries Spark wrote. One
partition and one shuffle partition keep the logs small (a task event per partition per stage).
Uncompressed, the environment, SQL-plan and stage events of four batches alone weigh about
400 KB, so the plain run leaves them out with `spark.eventLog.excludedPatterns` (Spark 4.1+);
task, job and SQL-end events stay, so readers still meet events they must skip. Both runs
together stay under 300 KB.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

from pipelines.generate_fixtures import _progress_of, _wait_for_batch
from pipelines.queries import FIXTURE_START_MS, RateSpec, build_session, rate_events, windowed_counts

RUN_NAMES = ("rolling_zstd", "plain")
EXTRA_RUN_NAMES = ("single_lz4",)

# Only spark.eventLog.* differs between the runs; `rolling_zstd` keeps Spark 4's defaults.
EVENT_LOG_CONF = {
    "rolling_zstd": {},
    "plain": {
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "false",
        "spark.eventLog.excludedPatterns": ",".join(
            [
                "SparkListenerEnvironmentUpdate",
                "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart",
                "SparkListenerStageSubmitted",
                "SparkListenerStageCompleted",
            ]
        ),
    },
    "single_lz4": {"spark.eventLog.rolling.enabled": "false", "spark.eventLog.compression.codec": "lz4"},
}

SESSION_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.driver.memory": "512m",
    "spark.eventLog.enabled": "true",
}

# 4 s of event time per batch: with 5 s windows and a 2 s watermark, batch 3 evicts the first
# window, so numRowsRemoved is not always 0.
RATE = RateSpec(rows_per_batch=6, start_ms=FIXTURE_START_MS, advance_ms=4000, num_partitions=1)
BATCHES = 4
TRIGGER_INTERVAL = "1500 milliseconds"


def run_query(spark, name: str):
    """Run the windowed count until BATCHES batches are reported, then stop it at once.

    No checkpoint is kept, so unlike generate_fixtures this does not wait for an idle moment: on
    a loaded machine a batch is nearly always running, and waiting would add batches. A batch
    the stop interrupts reports no progress, so the log and the report hold the same batches.
    """
    counts = windowed_counts(rate_events(spark, RATE))
    writer = counts.writeStream.queryName(f"event_log_{name}").outputMode("update").format("noop")
    query = writer.trigger(processingTime=TRIGGER_INTERVAL).start()
    try:
        _wait_for_batch(query, BATCHES - 1)
    finally:
        query.stop()
    return query


def write_run_report(path: Path, spark, query, conf: dict[str, str]) -> None:
    """Write what the query reported: ids, the event-log settings and `recentProgress` as JSON."""
    report = {
        "spark_version": spark.version,
        "app_id": spark.sparkContext.applicationId,
        "query_id": str(query.id),
        "run_id": str(query.runId),
        "event_log_conf": conf,
        "progress": _progress_of(query),
    }
    path.write_text(json.dumps(report, indent=1) + "\n")


def generate_run(out_dir: Path, name: str) -> None:
    """Run one application with the event-log settings of `name`; replace `OUT_DIR/<name>`."""
    log_dir = out_dir / name
    shutil.rmtree(log_dir, ignore_errors=True)
    log_dir.mkdir(parents=True)
    conf = {**SESSION_CONF, "spark.eventLog.dir": log_dir.as_uri(), **EVENT_LOG_CONF[name]}
    spark = build_session(f"ckptweb-event-log-{name}", master="local[1]", conf=conf)
    try:
        query = run_query(spark, name)
        write_run_report(out_dir / f"{name}-report.json", spark, query, EVENT_LOG_CONF[name])
    finally:
        # Stopping the context closes the log: drops `.inprogress` and finishes the last frame.
        spark.stop()


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Generate Spark-written event-log fixtures.")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument(
        "--only", action="append", choices=RUN_NAMES + EXTRA_RUN_NAMES, help="generate only this run (repeatable)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    out_dir = args.out_dir.resolve()
    names = args.only or list(RUN_NAMES)
    started = time.monotonic()
    for name in names:
        generate_run(out_dir, name)
    print(f"generated {', '.join(names)} in {out_dir} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
