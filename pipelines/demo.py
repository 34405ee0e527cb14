"""Run demo streaming queries that keep writing checkpoints for the dashboard to watch.

    python -m pipelines.demo OUT_DIR [--seconds N] [--trigger-seconds S]

Starts three queries from pipelines/queries.py on `rate-micro-batch` sources whose event time
follows the wall clock (windowed aggregation, stream-stream join, deduplication; all with JSON
file sinks), each checkpointed in `OUT_DIR/<name>/checkpoint` with its sink in
`OUT_DIR/<name>/output`. Prints `checkpoint <name> <checkpoint path> <sink output path>` per
query once it has started and then `ready` (stdout, flushed), runs until SIGTERM or SIGINT (or
for N seconds), and stops each query between two batches. The JVM runs in its own process group,
so a SIGTERM to the demo's whole group still lets Python stop the queries first. Restarting with
the same OUT_DIR resumes from the checkpoints. With CKPTWEB_INGEST_URL and CKPTWEB_INGEST_TOKEN
set, the ckptweb progress listener sends every batch's progress to that ckptweb (`manage.py demo`
sets both).

Disk use stays bounded: offset/commit logs and state files keep `minBatchesToRetain` batches,
sink logs are compacted with a `retention` of SINK_RETENTION, and the sink's data files older than
OUTPUT_MAX_AGE_SECONDS are deleted here (the sink never reads them back).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

from pipelines.progress_listener import CkptwebProgressListener
from pipelines.queries import (
    RateSpec,
    build_session,
    rate_dedup_query,
    stop_between_batches,
    stream_stream_join_query,
    windowed_agg_file_sink_query,
)

DEMO_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.minBatchesToRetain": "10",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "5",
    "spark.sql.streaming.stateStore.maintenanceInterval": "15s",
    "spark.sql.streaming.fileSink.log.compactInterval": "5",
    "spark.sql.streaming.fileSink.log.cleanupDelay": "60s",
}
SINK_RETENTION = "10m"
OUTPUT_MAX_AGE_SECONDS = 600
JANITOR_INTERVAL_SECONDS = 30
STOP_TIMEOUT_SECONDS = 60


def start_queries(spark, out_dir: Path, trigger_seconds: float) -> dict:
    """Start the demo queries; return them by name."""
    step_ms = int(trigger_seconds * 1000)
    queries = {}
    for name, writer in _demo_writers(spark, out_dir, step_ms).items():
        queries[name] = writer.trigger(processingTime=f"{step_ms} milliseconds").start()
        print(
            f"checkpoint {name} {(out_dir / name / 'checkpoint').resolve()} {(out_dir / name / 'output').resolve()}",
            flush=True,
        )
    print("ready", flush=True)
    return queries


def _demo_writers(spark, out_dir: Path, step_ms: int) -> dict:
    """The demo queries' stream writers by name, their rate sources starting now."""
    now_ms = int(time.time() * 1000)
    return {
        "windowed_agg_file_sink": windowed_agg_file_sink_query(
            spark, out_dir / "windowed_agg_file_sink", RateSpec(50, now_ms, step_ms), retention=SINK_RETENTION
        ),
        "stream_stream_join": stream_stream_join_query(
            spark,
            out_dir / "stream_stream_join",
            RateSpec(20, now_ms, step_ms),
            RateSpec(15, now_ms + step_ms // 2, step_ms),
            retention=SINK_RETENTION,
        ),
        "rate_dedup": rate_dedup_query(
            spark, out_dir / "rate_dedup", RateSpec(30, now_ms, step_ms), retention=SINK_RETENTION
        ),
    }


def delete_old_output(out_dir: Path, now: float) -> int:
    """Delete sink data files (and their Hadoop .crc) older than OUTPUT_MAX_AGE_SECONDS."""
    deleted = 0
    for data_file in out_dir.glob("*/output/part-*"):
        if now - data_file.stat().st_mtime > OUTPUT_MAX_AGE_SECONDS:
            data_file.with_name(f".{data_file.name}.crc").unlink(missing_ok=True)
            data_file.unlink(missing_ok=True)
            deleted += 1
    return deleted


def stop_on_signals() -> threading.Event:
    """Return an event that SIGTERM and SIGINT set (instead of interrupting the process)."""
    stop = threading.Event()
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stop.set())
    return stop


def run_until_stopped(queries: dict, out_dir: Path, seconds: float | None, stop: threading.Event) -> int:
    """Wait for `stop`, the deadline, or a failed query; return the exit status."""
    deadline = None if seconds is None else time.monotonic() + seconds
    while not stop.is_set():
        wait = JANITOR_INTERVAL_SECONDS
        if deadline is not None:
            wait = min(wait, deadline - time.monotonic())
        if stop.wait(max(wait, 0)) or (deadline is not None and time.monotonic() >= deadline):
            break
        failed = [name for name, query in queries.items() if not query.isActive]
        if failed:
            print(f"demo: queries stopped unexpectedly: {', '.join(failed)}", file=sys.stderr, flush=True)
            return 1
        delete_old_output(out_dir, time.time())
    return 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Run demo streaming queries writing checkpoints.")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--seconds", type=float, help="stop after this many seconds (default: until a signal)")
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="trigger interval (default 5)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    out_dir = args.out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    spark = build_session("ckptweb-demo", conf=DEMO_CONF, jvm_in_own_process_group=True)
    # After the session: PySpark's SparkContext installs a SIGINT handler that cancels all jobs,
    # which would abort the running batch instead of letting the queries stop between batches.
    stop = stop_on_signals()
    listener = add_progress_listener(spark, out_dir)
    queries = {}
    try:
        queries = start_queries(spark, out_dir, args.trigger_seconds)
        return run_until_stopped(queries, out_dir, args.seconds, stop)
    finally:
        _stop_everything(spark, queries, listener)


def _stop_everything(spark, queries: dict, listener: CkptwebProgressListener | None) -> None:
    """Stop the queries between batches, then the listener and the session."""
    for query in queries.values():
        stop_between_batches(query, timeout_seconds=STOP_TIMEOUT_SECONDS)
    if listener is not None:
        listener.close()
    spark.stop()


def add_progress_listener(spark, out_dir: Path) -> CkptwebProgressListener | None:
    """Send every batch's progress to ckptweb when CKPTWEB_INGEST_URL and _TOKEN are set (the demo sets them)."""
    url, token = os.environ.get("CKPTWEB_INGEST_URL"), os.environ.get("CKPTWEB_INGEST_TOKEN")
    if not (url and token):
        return None
    listener = CkptwebProgressListener(url, token, spool_dir=out_dir / ".progress-spool")
    spark.streams.addListener(listener)
    return listener


if __name__ == "__main__":
    sys.exit(main())
