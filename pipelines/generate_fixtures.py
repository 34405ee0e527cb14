"""Generate the small Spark-written checkpoints under tests/fixtures/.

    python -m pipelines.generate_fixtures OUT_DIR [--only NAME ...]

Every query runs in real PySpark (local[2], 2 shuffle partitions) with settings that make
maintenance happen within a dozen batches: state snapshots after 2 deltas, cleanup keeping 3
batches, file-log compaction every 3 batches with no cleanup delay, a 1 s maintenance interval.
Snapshots and cleanup happen on Spark's background thread, apart from the batches: before it
stops a query the generator waits (bounded) for the ones the fixtures show (maintenance_wanted,
pipelines/maintenance_wait.py), so a loaded machine gives a few more batches, not other files.
Each query writes `OUT_DIR/<name>/checkpoint` (plus `output/`, `input/` beside it) and
`OUT_DIR/<name>/spark-report.json`: what Spark itself reported (see pipelines/README.md).

`killed_mid_batch` runs in a child process (its own session and JVM) that sleeps inside the
foreachBatch of batch KILL_BATCH_ID; the parent SIGKILLs the child's whole process group, so
`offsets/<KILL_BATCH_ID>` has no `commits/<KILL_BATCH_ID>`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pipelines.maintenance_wait import (
    MAINTENANCE_INTERVAL_CONF,
    MaintenanceWanted,
    restart_state_store_maintenance,
    wait_for_maintenance,
)
from pipelines.queries import (
    FIXTURE_START_MS,
    RateSpec,
    build_session,
    file_source_dedup_query,
    rate_dedup_noop_query,
    rate_limit_noop_query,
    stop_between_batches,
    stream_stream_join_noop_query,
    stream_stream_join_query,
    windowed_agg_file_sink_query,
    windowed_agg_foreach_batch_query,
    windowed_agg_noop_query,
)
from pipelines.spark_report import read_spark_report

QUERY_NAMES = (
    "windowed_agg_file_sink",
    "file_source_dedup",
    "stream_stream_join",
    "killed_mid_batch",
    "hdfs_zstd_row_checksum",
    "rocksdb_changelog_agg",
    "rocksdb_checkpoint_v2_dedup",
    "rocksdb_no_changelog_agg",
    "rocksdb_stream_join",
    "rocksdb_limit_checkpoint_v2",
)

GENERATOR_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.driver.memory": "1g",
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.minBatchesToRetain": "3",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
    "spark.sql.streaming.fileSink.log.compactInterval": "3",
    "spark.sql.streaming.fileSource.log.compactInterval": "3",
    "spark.sql.streaming.fileSink.log.cleanupDelay": "0",
    "spark.sql.streaming.fileSource.log.cleanupDelay": "0",
}

ROCKSDB_PROVIDER_CONF = {
    "spark.sql.streaming.stateStore.providerClass": (
        "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
    ),
}
ROCKSDB_CHANGELOG_CONF = {
    **ROCKSDB_PROVIDER_CONF,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}
# Spark's default: every commit uploads a zip, no changelogs.
ROCKSDB_NO_CHANGELOG_CONF = {
    **ROCKSDB_PROVIDER_CONF,
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false",
}
CHECKPOINT_V2_CONF = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}

# SQL confs of single queries, set in the session only while the query starts: a streaming query
# runs on a clone of the session taken at start (StreamExecution.sparkSessionForStream).
QUERY_CONF = {
    "hdfs_zstd_row_checksum": {
        "spark.sql.streaming.stateStore.compression.codec": "zstd",
        "spark.sql.streaming.stateStore.rowChecksum.enabled": "true",
    },
    "rocksdb_changelog_agg": ROCKSDB_CHANGELOG_CONF,
    "rocksdb_checkpoint_v2_dedup": {**ROCKSDB_CHANGELOG_CONF, **CHECKPOINT_V2_CONF},
    "rocksdb_no_changelog_agg": ROCKSDB_NO_CHANGELOG_CONF,
    "rocksdb_stream_join": ROCKSDB_CHANGELOG_CONF,
    "rocksdb_limit_checkpoint_v2": {**ROCKSDB_NO_CHANGELOG_CONF, **CHECKPOINT_V2_CONF},
}

RATE = RateSpec(rows_per_batch=10, start_ms=FIXTURE_START_MS, advance_ms=2000)
JOIN_LEFT = RateSpec(rows_per_batch=5, start_ms=FIXTURE_START_MS, advance_ms=1000)
JOIN_RIGHT = RateSpec(rows_per_batch=4, start_ms=FIXTURE_START_MS + 500, advance_ms=1000)
RATE_BATCHES = 12
# Reached in batch 6 of 12 (10 rows a batch): later batches let nothing through.
STREAMING_LIMIT = 55
# Long enough for a batch to finish before the next trigger, so the query can be stopped idle;
# doubled at each new attempt (trigger_interval).
TRIGGER_INTERVAL_MS = 1500
DEDUP_INPUT_FILES = 8
KILL_BATCH_ID = 6
CHILD_TIMEOUT_SECONDS = 300
STOP_ATTEMPTS = 3
# Before a new attempt: a few maintenance intervals (1 s) in which nothing of the stopped query's
# was written (_clear_failed_attempt), within this bound.
RETRY_QUIET_SECONDS = 5
RETRY_CLEAR_TIMEOUT_SECONDS = 120

REPO_ROOT = Path(__file__).resolve().parents[1]
# Versions that Spark's cleanup (minBatchesToRetain 3 over 12 batches) has deleted in the queries
# whose cleanup tests/spark/test_fixture_regeneration.py checks.
CLEANED_QUERIES = tuple(name for name in QUERY_NAMES if name.startswith("rocksdb_")) + ("hdfs_zstd_row_checksum",)
CLEANED_UP_TO_VERSION = 5


def maintenance_wanted(name: str) -> MaintenanceWanted:
    """What Spark's maintenance thread must have left in query ``name``'s state before it stops:
    a snapshot in every HDFS-backed store, two zips in every RocksDB store, and the first versions
    gone where the fixture shows cleanup (pipelines/maintenance_wait.py says why it is waited for)."""
    cleaned_below = CLEANED_UP_TO_VERSION + 1 if name in CLEANED_QUERIES else 0
    return MaintenanceWanted(snapshots=2 if name.startswith("rocksdb_") else 1, cleaned_below=cleaned_below)


def _query_failure(query) -> str | None:
    error = query.exception()
    return f"query {query.name} failed: {error}" if error is not None else None


@dataclass(frozen=True)
class QueryRun:
    """What a finished run reported: its id and the JSON of each StreamingQueryProgress."""

    query_id: str
    progress: list[dict]


# --- rate-source queries: a fixed number of triggers, stopped between two batches ---------------


def trigger_interval(attempt: int) -> str:
    """The trigger of attempt 1, 2, 3: 1.5 s, 3 s, 6 s. On a loaded machine a batch can take as
    long as the trigger; batches then run back to back with no idle moment to stop in, and the
    stop lands inside one (the attempt fails): a longer trigger leaves that moment again."""
    return f"{TRIGGER_INTERVAL_MS * 2 ** (attempt - 1)} milliseconds"


def run_rate_query(writer, base: Path, trigger: str) -> QueryRun:
    """Start `writer`, let it commit RATE_BATCHES batches (more while Spark's maintenance catches
    up), and stop it while no batch runs."""
    query = writer.trigger(processingTime=trigger).start()
    try:
        _wait_for_batch(query, RATE_BATCHES - 1)
        wait_for_maintenance(base / "checkpoint", maintenance_wanted(base.name), lambda: _query_failure(query))
    finally:
        stop_between_batches(query, timeout_seconds=60)
    return QueryRun(str(query.id), _progress_of(query))


def _wait_for_batch(query, batch_id: int, timeout_seconds: float = 300) -> None:
    """Wait until the progress of `batch_id` is reported (the batch is committed)."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise RuntimeError(f"query {query.name} failed: {query.exception()}")
        last = query.lastProgress
        if last is not None and last["batchId"] >= batch_id:
            return
        time.sleep(0.02)
    raise TimeoutError(f"query {query.name} did not reach batch {batch_id}")


def _progress_of(query) -> list[dict]:
    return [json.loads(progress.json) for progress in query.recentProgress]


def run_windowed_agg_file_sink(spark, base: Path, trigger: str) -> QueryRun:
    return run_rate_query(windowed_agg_file_sink_query(spark, base, RATE), base, trigger)


def run_stream_stream_join(spark, base: Path, trigger: str) -> QueryRun:
    return run_rate_query(stream_stream_join_query(spark, base, JOIN_LEFT, JOIN_RIGHT), base, trigger)


def run_windowed_agg_noop(spark, base: Path, trigger: str) -> QueryRun:
    """The windowed aggregation without a sink: for the state store settings of QUERY_CONF."""
    return run_rate_query(windowed_agg_noop_query(spark, base, base.name, RATE), base, trigger)


def run_rate_dedup_noop(spark, base: Path, trigger: str) -> QueryRun:
    return run_rate_query(rate_dedup_noop_query(spark, base, base.name, RATE), base, trigger)


def run_stream_stream_join_noop(spark, base: Path, trigger: str) -> QueryRun:
    """The stream-stream join without a sink: for the state store settings of QUERY_CONF."""
    return run_rate_query(stream_stream_join_noop_query(spark, base, base.name, JOIN_LEFT, JOIN_RIGHT), base, trigger)


def run_rate_limit_noop(spark, base: Path, trigger: str) -> QueryRun:
    return run_rate_query(rate_limit_noop_query(spark, base, base.name, RATE, STREAMING_LIMIT), base, trigger)


@contextmanager
def session_conf(spark, conf: dict[str, str]):
    """Set the SQL confs `conf` in `spark` for the duration of the block, then restore them.

    A conf that sets the state-store maintenance interval also restarts Spark's maintenance thread
    on entry and on exit, since Spark keeps the interval of the first stateful query of the JVM."""
    previous = {key: spark.conf.get(key, None) for key in conf}
    sets_maintenance = MAINTENANCE_INTERVAL_CONF in conf
    for key, value in conf.items():
        spark.conf.set(key, value)
    if sets_maintenance:
        restart_state_store_maintenance(spark)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
        if sets_maintenance:
            restart_state_store_maintenance(spark)


# --- file source: the generator writes one input file, then processes all available ------------


def run_file_source_dedup(spark, base: Path, trigger: str) -> QueryRun:
    """Feed DEDUP_INPUT_FILES JSON files one at a time; each becomes a batch (plus no-data batches).

    processAllAvailable drives this query, which stops idle: it takes ``trigger`` as every runner
    does and needs none."""
    input_dir = base / "input"
    input_dir.mkdir(parents=True)
    query = file_source_dedup_query(spark, base).start()
    try:
        for index in range(DEDUP_INPUT_FILES):
            write_dedup_input(input_dir, index)
            query.processAllAvailable()
        wait_for_maintenance(base / "checkpoint", maintenance_wanted(base.name), lambda: _query_failure(query))
    finally:
        stop_between_batches(query, timeout_seconds=60)
    return QueryRun(str(query.id), _progress_of(query))


def write_dedup_input(input_dir: Path, index: int) -> Path:
    """Write input file `index` atomically (hidden temp name, then rename), with a fixed mtime.

    Rows n = 4*index .. 4*index+5 (the first two repeat the previous file's last two: duplicates);
    from file 5 on, one extra row 16 s late, older than the 10 s watermark (dropped).
    """
    numbers = list(range(4 * index, 4 * index + 6))
    if index >= 5:
        numbers.append(4 * index - 16)
    start = datetime.fromtimestamp(FIXTURE_START_MS / 1000, tz=UTC)
    lines = [
        json.dumps({"id": f"e{n}", "event_time": (start + timedelta(seconds=n)).isoformat(), "value": n})
        for n in numbers
    ]
    final = input_dir / f"f{index:03d}.json"
    temp = input_dir / f".{final.name}.tmp"
    temp.write_text("\n".join(lines) + "\n")
    mtime = FIXTURE_START_MS / 1000 + 60 * index
    os.utime(temp, (mtime, mtime))
    temp.rename(final)
    return final


# --- killed_mid_batch: a child process SIGKILLed while it sleeps inside a batch ----------------


def run_killed_mid_batch(base: Path) -> QueryRun:
    """Run the doomed child, kill its process group once batch KILL_BATCH_ID is in flight."""
    base.mkdir(parents=True)
    sleeping = base / "child-sleeping.json"
    with tempfile.TemporaryDirectory(prefix="ckptweb-killed-") as scratch:
        _run_child_until_killed(base, scratch, sleeping)
    status = json.loads(sleeping.read_text())
    sleeping.unlink()
    return QueryRun(status["query_id"], status["progress"])


def _run_child_until_killed(base: Path, scratch: str, sleeping: Path) -> None:
    """Start the child, wait until it sleeps inside batch KILL_BATCH_ID and Spark's maintenance
    is done, then SIGKILL its process group; on a failure, print the end of the child's log."""
    log_path = Path(scratch) / "child.log"
    with open(log_path, "wb") as log:
        child = _start_child(base, scratch, log)
        try:
            _wait_for_child_sleep(child, sleeping, base / "checkpoint" / "offsets" / str(KILL_BATCH_ID))
            # The child sleeps inside the batch; its maintenance thread goes on meanwhile.
            wait_for_maintenance(base / "checkpoint", maintenance_wanted(base.name), lambda: _child_exit(child))
        except BaseException:
            sys.stderr.write(log_path.read_text(errors="replace")[-4000:])
            raise
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def _start_child(base: Path, scratch: str, log) -> subprocess.Popen:
    python_path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    # TMPDIR: the SIGKILLed child cannot clean its scratch dir; the parent's temp dir holds it.
    env = dict(os.environ, PYTHONPATH=python_path, TMPDIR=scratch)
    command = [sys.executable, "-m", "pipelines.generate_fixtures", str(base.parent), "--doomed-child"]
    # A new session makes the child the leader of a process group that also holds its JVM.
    return subprocess.Popen(command, cwd=scratch, env=env, stdout=log, stderr=log, start_new_session=True)


def _child_exit(child: subprocess.Popen) -> str | None:
    status = child.poll()
    return None if status is None else f"the killed_mid_batch child exited early with status {status}"


def _wait_for_child_sleep(child: subprocess.Popen, sleeping: Path, offsets_file: Path) -> None:
    deadline = time.monotonic() + CHILD_TIMEOUT_SECONDS
    while not (sleeping.exists() and offsets_file.exists()):
        if child.poll() is not None:
            raise RuntimeError(f"killed_mid_batch child exited early with status {child.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError("killed_mid_batch child never reached the batch to kill")
        time.sleep(0.1)


def run_doomed_child(out_dir: Path) -> None:
    """In the child: run the query; in batch KILL_BATCH_ID write the output, report, then sleep."""
    base = out_dir / "killed_mid_batch"
    spark = build_session("ckptweb-fixture-killed-mid-batch", conf=GENERATOR_CONF)
    running = {}

    def on_batch(frame, batch_id: int) -> None:
        frame.write.mode("append").json(str(base / "output"))
        if batch_id == KILL_BATCH_ID:
            query = running["query"]
            status = {"query_id": str(query.id), "progress": _progress_of(query)}
            _write_atomically(base / "child-sleeping.json", json.dumps(status))
            time.sleep(3600)

    writer = windowed_agg_foreach_batch_query(spark, base, "killed_mid_batch", RATE, on_batch)
    running["query"] = writer.trigger(processingTime=trigger_interval(1)).start()
    running["query"].awaitTermination()


def _write_atomically(path: Path, text: str) -> None:
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text)
    temp.rename(path)


# --- reports, cleanup, main --------------------------------------------------------------------


def write_spark_report(spark, base: Path, run: QueryRun) -> dict:
    """Write `<base>/spark-report.json` from the run and Spark's reading of the checkpoint logs."""
    report = {
        "spark_version": spark.version,
        "query_id": run.query_id,
        "progress": run.progress,
        **read_spark_report(spark, str(base / "checkpoint")),
    }
    (base / "spark-report.json").write_text(json.dumps(report, indent=1) + "\n")
    return report


def check_last_batch_committed(report: dict, name: str) -> None:
    """Raise if the run ended with an offsets entry that has no commit (a stop that hit a batch)."""
    offsets = [entry["batch_id"] for entry in report["offset_log"]]
    commits = {entry["batch_id"] for entry in report["commit_log"]}
    if not offsets or offsets[-1] not in commits:
        raise RuntimeError(f"{name}: last offsets entry {offsets[-1:]} has no commit")


BYPRODUCTS = ("spark-warehouse", "metastore_db", "derby.log")


def remove_byproducts(base: Path) -> None:
    """Delete what Spark leaves beside the fixtures that is no checkpoint, sink log or input."""
    for pattern in BYPRODUCTS:
        for path in base.rglob(pattern):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()


IN_PROCESS_RUNNERS = {
    "windowed_agg_file_sink": run_windowed_agg_file_sink,
    "file_source_dedup": run_file_source_dedup,
    "stream_stream_join": run_stream_stream_join,
    "hdfs_zstd_row_checksum": run_windowed_agg_noop,
    "rocksdb_changelog_agg": run_windowed_agg_noop,
    "rocksdb_checkpoint_v2_dedup": run_rate_dedup_noop,
    "rocksdb_no_changelog_agg": run_windowed_agg_noop,
    "rocksdb_stream_join": run_stream_stream_join_noop,
    "rocksdb_limit_checkpoint_v2": run_rate_limit_noop,
}


def generate(out_dir: Path, names: list[str]) -> None:
    """Regenerate the fixtures `names` under `out_dir` (each one's directory is replaced)."""
    for name in names:
        shutil.rmtree(out_dir / name, ignore_errors=True)
    runs = {}
    if "killed_mid_batch" in names:
        # Before this process starts its own JVM: one Spark job at a time on small machines.
        runs["killed_mid_batch"] = run_killed_mid_batch(out_dir / "killed_mid_batch")
    spark = build_session("ckptweb-fixture-generator", conf=GENERATOR_CONF)
    try:
        for name in names:
            base = out_dir / name
            if name in IN_PROCESS_RUNNERS:
                runs[name] = _run_until_clean_stop(spark, name, base)
            write_spark_report(spark, base, runs[name])
            remove_byproducts(base)
    finally:
        spark.stop()


def _run_until_clean_stop(spark, name: str, base: Path) -> QueryRun:
    for attempt in range(1, STOP_ATTEMPTS + 1):
        base.mkdir(parents=True)
        with session_conf(spark, QUERY_CONF.get(name, {})):
            run = IN_PROCESS_RUNNERS[name](spark, base, trigger_interval(attempt))
        try:
            check_last_batch_committed(read_spark_report(spark, str(base / "checkpoint")), name)
            return run
        except RuntimeError as error:
            print(f"{error}; attempt {attempt} of {STOP_ATTEMPTS}", file=sys.stderr)
            _clear_failed_attempt(spark, base)
    raise RuntimeError(f"{name}: could not stop the query between two batches")


def _clear_failed_attempt(spark, base: Path) -> None:
    """Delete a failed attempt's directory once Spark no longer writes into it.

    After stop() the interrupted batch's tasks may still run, and Spark's maintenance thread keeps
    the stopped query's state stores until its next run finds them inactive (a RocksDB snapshot
    upload may be under way): a write after a plain rmtree recreated `checkpoint/state`, and the
    next attempt failed "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY ... on batch 0" (a fixture
    regeneration at load average 20). So: delete, let a quiet period pass, and look again.
    """
    deadline = time.monotonic() + RETRY_CLEAR_TIMEOUT_SECONDS
    while True:
        shutil.rmtree(base, ignore_errors=True)
        time.sleep(RETRY_QUIET_SECONDS)
        if not base.exists() and not spark.sparkContext.statusTracker().getActiveJobsIds():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"Spark still wrote into {base} {RETRY_CLEAR_TIMEOUT_SECONDS} s after its query stopped")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Generate Spark-written checkpoint fixtures.")
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--only", action="append", choices=QUERY_NAMES, help="generate only this query (repeatable)")
    parser.add_argument("--doomed-child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    out_dir = args.out_dir.resolve()
    if args.doomed_child:
        run_doomed_child(out_dir)
        return 0
    names = [name for name in QUERY_NAMES if not args.only or name in args.only]
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    generate(out_dir, names)
    print(f"generated {', '.join(names)} in {out_dir} in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
