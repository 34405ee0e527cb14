"""A small Spark application for tests/spark/test_runtime_charts_vs_spark.py: a query run several times
over one checkpoint, with ckptweb's progress listener and Spark's event log both recording it.

    python -m spark.runtime_pipeline BASE EVENT_LOG_DIR CKPTWEB_URL TOKEN REPORT --runs 3

(run from the repository root with the repository and tests/ on PYTHONPATH). Each run writes one
input file, then starts ``pipelines.queries.file_source_dedup_query`` on ``BASE`` with
Trigger.AvailableNow and waits for its end: a restart (a new run id) per run, no timing
involved. File source and sink logs compact every COMPACT_INTERVAL batches, so the first runs
already hold a compaction of each. The event log is plain text (one file, renamed from
``.inprogress`` when the application stops). REPORT gets the query id, every run's
``recentProgress`` (Spark's own StreamingQueryProgress JSON) and the listener's counters, written
once the listener has sent every progress.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from pipelines.generate_fixtures import write_dedup_input
from pipelines.progress_listener import CkptwebProgressListener
from pipelines.queries import build_session, file_source_dedup_query
from spark.restart import run_to_end

COMPACT_INTERVAL = 2
SEND_TIMEOUT_SECONDS = 120


def session_conf(event_log_dir: Path) -> dict[str, str]:
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": str(event_log_dir),
        "spark.eventLog.rolling.enabled": "false",
        "spark.eventLog.compress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.streaming.fileSink.log.compactInterval": str(COMPACT_INTERVAL),
        "spark.sql.streaming.fileSource.log.compactInterval": str(COMPACT_INTERVAL),
    }


def wait_until_sent(listener: CkptwebProgressListener, count: int) -> None:
    """Spark's listener bus delivers events asynchronously: wait until the listener sent ``count``."""
    deadline = time.monotonic() + SEND_TIMEOUT_SECONDS
    while listener.stats()["sent"] < count:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the listener sent {listener.stats()} of {count} progress events within {SEND_TIMEOUT_SECONDS} s"
            )
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("base", "event_log_dir", "url", "token", "report"):
        parser.add_argument(name)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    base, event_log_dir = Path(args.base), Path(args.event_log_dir)
    (base / "input").mkdir(parents=True, exist_ok=True)
    spark = build_session("ckptweb-runtime-charts", master="local[1]", conf=session_conf(event_log_dir))
    listener = CkptwebProgressListener(args.url, args.token, spool_dir=base / "spool")
    spark.streams.addListener(listener)
    progress = []
    for run in range(args.runs):
        write_dedup_input(base / "input", run)
        progress += run_to_end(file_source_dedup_query(spark, base).trigger(availableNow=True).start(), base)
    wait_until_sent(listener, len(progress))
    spark.streams.removeListener(listener)
    closed = listener.close(timeout_seconds=30)
    report = {
        "query_id": progress[0]["id"],
        "progress": progress,
        "listener": listener.stats(),
        "listener_closed": closed,
    }
    spark.stop()
    Path(args.report).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
