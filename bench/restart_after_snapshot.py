"""Benchmark: Spark's restart from a long HDFS delta chain against a restart after our snapshot.

Usage (from the repository root; a few minutes on 2 cores, PySpark 4.3.0, Java 17)::

    .venv/bin/python -m bench.restart_after_snapshot [--workdir DIR] [--batches 100]
                                                     [--keys 20000] [--repeat 3]

1. Builds one checkpoint with real PySpark into ``DIR/chain`` (a temp dir by default; an existing
   one is reused): about ``--batches`` batches of ``rate-micro-batch`` with ``--keys`` rows per
   batch, ``groupBy(value % keys).count()`` in update mode into the noop sink, 2 shuffle
   partitions, HDFS provider, lz4, and Spark's own snapshots kept away (minDeltasForSnapshot
   100000, maintenance every hour), so every batch rewrites every key and version N is
   reachable only through N deltas.
2. In one session, ``--repeat`` times and alternating: copies the checkpoint twice, writes our
   snapshot of the newest committed version into one copy (``plan_snapshot`` + ``apply_snapshot``,
   timed), and restarts the query on each copy with Trigger.AvailableNow (one more batch, which
   loads that version). Measured: wall-clock from ``start()`` to the end of the run, and the
   batch's ``triggerExecution`` from its progress. One unmeasured restart warms the JVM first.
3. Checks that both restarts end with the same state (``statestore`` reader, sum of counts) and
   prints the medians and the ratio chain / snapshot.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from workers.checkpoint.maintenance.snapshot import apply_snapshot, plan_snapshot
from workers.checkpoint.stateinventory import files_for_version, list_state_store_dirs, parse_hdfs_state_files
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

PARTITIONS = 2
CONF = {
    "spark.sql.shuffle.partitions": str(PARTITIONS),
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "100000",
    "spark.sql.streaming.stateStore.maintenanceInterval": "3600s",
    "spark.driver.memory": "2g",
}


def _writer(spark, base: Path, keys: int):
    from pyspark.sql import functions as F

    from pipelines.queries import FIXTURE_START_MS, RateSpec, rate_events

    events = rate_events(spark, RateSpec(rows_per_batch=keys, start_ms=FIXTURE_START_MS))
    counts = events.groupBy((F.col("value") % keys).alias("k")).count()
    return (
        counts.writeStream.queryName(f"bench-{base.name}")
        .format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(base / "checkpoint"))
    )


def build_chain(spark, base: Path, batches: int, keys: int) -> None:
    """Run the query for about ``batches`` batches (0 s trigger; one AvailableNow run per batch is slow).

    A 0 s trigger is never idle, so the stop may interrupt the next batch: the restarts then run
    that batch again, on both copies alike.
    """
    query = _writer(spark, base, keys).trigger(processingTime="0 seconds").start()
    try:
        while (query.lastProgress or {}).get("batchId", -1) < batches - 1:
            if query.exception() is not None:
                raise RuntimeError(str(query.exception()))
            time.sleep(0.1)
    finally:
        query.stop()


def delta_chain(base: Path) -> int:
    """The deltas a load of the newest committed version replays in partition 0 (our reading)."""
    storage = CheckpointStorage(str(base / "checkpoint"))
    store = next(s for s in list_state_store_dirs(storage) if s.partition == 0)
    version = max(int(p.name) for p in (base / "checkpoint" / "commits").iterdir() if p.name.isdigit()) + 1
    return sum(1 for f in files_for_version(parse_hdfs_state_files(store.files)[0], version) if not f.is_snapshot)


def restart_once(spark, base: Path, keys: int) -> tuple[float, int]:
    """Restart with Trigger.AvailableNow; return wall seconds and the first batch's triggerExecution ms."""
    started = time.perf_counter()
    query = _writer(spark, base, keys).trigger(availableNow=True).start()
    query.awaitTermination()
    elapsed = time.perf_counter() - started
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    first = json.loads(query.recentProgress[0].json)
    return elapsed, first["durationMs"]["triggerExecution"]


def state_total(spark, base: Path) -> int:
    frame = spark.read.format("statestore").load(str(base / "checkpoint"))
    return frame.selectExpr("sum(value.count)").collect()[0][0]


def snapshot_copy(source: Path, target: Path) -> tuple[float, int]:
    """Copy ``source`` and write our snapshots into the copy; return seconds and snapshots written."""
    shutil.copytree(source, target)
    storage = CheckpointStorage(str(target / "checkpoint"))
    started = time.perf_counter()
    plan = plan_snapshot(storage, now=time.time(), quiet_seconds=0, min_chain=0)
    applied = apply_snapshot(storage, plan)
    return time.perf_counter() - started, len(applied.written)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--batches", type=int, default=100)
    parser.add_argument("--keys", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    from pipelines.queries import build_session

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-bench-restart-"))
    spark = build_session("bench-restart-after-snapshot", master="local[2]", conf=CONF)
    chain = workdir / "chain"
    if not (chain / "checkpoint" / "commits").exists():
        started = time.perf_counter()
        build_chain(spark, chain, args.batches, args.keys)
        print(f"built {chain} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    measured = _restart_copies(spark, chain, workdir / "runs", args)
    if measured is None:
        return 1
    results, writes = measured
    report(results, writes, delta_chain(chain), args)
    spark.stop()
    return 0


def _restart_copies(spark, chain: Path, runs: Path, args) -> tuple[dict, list[tuple[float, int]]] | None:
    """Restart copies of the chain as it is and with our snapshots, ``args.repeat`` times each.

    Returns the restart figures by kind and the snapshot writes, or None when the two restarts
    of a repeat end with different state."""
    shutil.rmtree(runs, ignore_errors=True)
    shutil.copytree(chain, runs / "warmup")
    restart_once(spark, runs / "warmup", args.keys)
    results = {"chain": [], "snapshot": []}
    writes = []
    for index in range(args.repeat):
        shutil.copytree(chain, runs / f"chain-{index}")
        results["chain"].append(restart_once(spark, runs / f"chain-{index}", args.keys))
        writes.append(snapshot_copy(chain, runs / f"snapshot-{index}"))
        results["snapshot"].append(restart_once(spark, runs / f"snapshot-{index}", args.keys))
        totals = {state_total(spark, runs / f"{kind}-{index}") for kind in results}
        if len(totals) != 1:
            print(f"state differs after the restarts: {totals}", file=sys.stderr)
            return None
    return results, writes


def report(results: dict, writes: list[tuple[float, int]], deltas: int, args) -> None:
    wall = {kind: statistics.median(r[0] for r in runs) for kind, runs in results.items()}
    trigger = {kind: statistics.median(r[1] for r in runs) for kind, runs in results.items()}
    print(f"{deltas} deltas per partition, {PARTITIONS} partitions, {args.keys} keys, median of {args.repeat}")
    for kind in results:
        print(
            f"restart {kind:9s} wall {wall[kind]:6.2f} s   first batch triggerExecution {trigger[kind] / 1000:6.2f} s"
        )
    print(
        f"ratio chain / snapshot: wall {wall['chain'] / wall['snapshot']:.2f}x, "
        f"batch {trigger['chain'] / trigger['snapshot']:.2f}x"
    )
    print(f"our snapshot (plan + apply, {writes[0][1]} stores): median {statistics.median(w[0] for w in writes):.2f} s")


if __name__ == "__main__":
    sys.exit(main())
