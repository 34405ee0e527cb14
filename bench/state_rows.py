"""Benchmark: rows and bytes of a >= 1M-row HDFS state at its latest version, ours against Spark.

Usage (from the repository root; ~3 minutes on 2 cores, PySpark 4.3.0 and Java 17)::

    .venv/bin/python -m bench.state_rows [--workdir DIR] [--rows-per-batch 250000] [--repeat 3]

1. Builds the state with real PySpark into ``DIR`` (a temp dir by default; an existing one is
   reused): ``rate-micro-batch`` rows keyed by variable-length strings (``user-<n>``), 6 batches
   of ``--rows-per-batch`` rows 10 s of event time apart, ``dropDuplicates(key, timestamp)`` with
   a 35 s watermark, 8 shuffle partitions, HDFS provider, lz4. From batch 5 on, each batch evicts
   an old batch's rows: the latest version holds 4-5 batches' rows and the deltas the removals.
2. Measures, in this one run, the best of ``--repeat``:
   * ours: ``staterows.read_state_size`` for every partition (one process);
   * raw lz4: ``lz4.block.decompress`` of every block payload of the same files (no framing
     checks, no checksums, no records);
   * Spark warm: ``spark.read.format("statestore").load(ckpt)`` count and byte sum, after one
     unmeasured run in the same session;
   * Spark fresh: the same in a new Python + JVM process (start-up included).
3. Prints the timings, the ratios and the peak memory (ru_maxrss) of this process.
"""

from __future__ import annotations

import argparse
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pipelines.queries import build_session, stop_between_batches
from workers.checkpoint.lz4block import HEADER, METHOD_LZ4
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.staterows import StateSize, read_state_size
from workers.checkpoint.storage import CheckpointStorage

BATCHES = 6
PARTITIONS = 8
SPARK_QUERY = (
    "SELECT count(*) AS row_count, "
    "sum(octet_length(key.key)) AS key_chars FROM statestore"
)


def build_state(base: Path, rows_per_batch: int) -> Path:
    """Run the dedup query over BATCHES rate-micro-batch batches; return the checkpoint path."""
    checkpoint = base / "checkpoint"
    if (checkpoint / "commits").is_dir():
        return checkpoint
    from pyspark.sql import functions as F

    spark = build_session("bench-state-rows", master="local[2]", conf={
        "spark.sql.shuffle.partitions": str(PARTITIONS),
        "spark.driver.memory": "3g",
    })
    events = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch).option("numPartitions", 2)
        .option("startTimestamp", 1_704_067_200_000).option("advanceMillisPerBatch", 10_000)
        .load()
        .select(F.concat(F.lit("user-"), F.col("value").cast("string")).alias("key"), "timestamp")
    )
    deduped = events.withWatermark("timestamp", "35 seconds").dropDuplicates(["key", "timestamp"])
    query = (
        deduped.writeStream.format("noop").outputMode("append")
        .option("checkpointLocation", str(checkpoint)).trigger(processingTime="0 seconds").start()
    )
    # The source never runs dry: stop after BATCHES commits (between batches if one ends within
    # 5 s). From then on every batch evicts one old batch's rows, so the state stays at 4-5
    # batches' rows, and an interrupted batch leaves nothing the latest commit depends on.
    while query.isActive and _committed(checkpoint) < BATCHES:
        time.sleep(0.2)
    stop_between_batches(query, 5)
    spark.stop()
    return checkpoint


def _committed(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def latest_version(checkpoint: Path) -> int:
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()) + 1


def measure_ours(checkpoint: Path, version: int) -> StateSize:
    storage = CheckpointStorage(str(checkpoint))
    total = StateSize(0, 0, 0)
    for store in list_state_store_dirs(storage):
        total = total + read_state_size(storage, store, version, codec="lz4")
    return total


def measure_raw_lz4(checkpoint: Path, version: int) -> int:
    """Decompress every LZ4 block payload of the state files, trusting the headers."""
    import lz4.block

    produced = 0
    for path in sorted((checkpoint / "state").glob("*/*/*.*")):
        if path.suffix not in (".delta", ".snapshot") or int(path.stem) > version:
            continue
        data, pos = path.read_bytes(), 0
        while pos < len(data):
            _, token, compressed, raw, _ = HEADER.unpack_from(data, pos)
            pos += HEADER.size
            if token & 0xF0 == METHOD_LZ4:
                produced += len(lz4.block.decompress(data[pos : pos + compressed], uncompressed_size=raw))
            pos += compressed
    return produced


def spark_count(spark, checkpoint: Path) -> tuple[int, int]:
    spark.read.format("statestore").load(str(checkpoint)).createOrReplaceTempView("statestore")
    row = spark.sql(SPARK_QUERY).collect()[0]
    return row["row_count"], row["key_chars"]


def best_of(repeat: int, action):
    timings, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        timings.append(time.perf_counter() - start)
    return min(timings), result


def spark_fresh_seconds(checkpoint: Path) -> float:
    code = (
        "import time; t = time.perf_counter()\n"
        "from pipelines.queries import build_session\n"
        "from bench.state_rows import spark_count\n"
        "from pathlib import Path\n"
        "spark = build_session('bench-fresh', master='local[2]', conf={'spark.sql.shuffle.partitions': '8'})\n"
        f"print(spark_count(spark, Path({str(checkpoint)!r})))\n"
        "spark.stop(); print(time.perf_counter() - t)\n"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return float(output.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--rows-per-batch", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    base = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-bench-"))
    checkpoint = build_state(base, args.rows_per_batch)
    version = latest_version(checkpoint)
    files = sorted(p.name for p in (checkpoint / "state" / "0" / "0").glob("*.*") if not p.name.startswith("."))
    print(f"checkpoint {checkpoint}, version {version}, partition 0 files: {files}")

    ours_s, ours = best_of(args.repeat, lambda: measure_ours(checkpoint, version))
    raw_s, raw_bytes = best_of(args.repeat, lambda: measure_raw_lz4(checkpoint, version))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ours:       {ours_s:7.3f} s  {ours}  (peak RSS so far {peak_mib:.0f} MiB)")
    print(f"raw lz4:    {raw_s:7.3f} s  {raw_bytes} bytes decompressed")

    spark = build_session("bench-warm", master="local[2]", conf={"spark.sql.shuffle.partitions": "8"})
    spark_count(spark, checkpoint)  # warm-up: JIT, class loading, file system caches
    warm_s, (spark_rows, key_chars) = best_of(args.repeat, lambda: spark_count(spark, checkpoint))
    spark.stop()
    fresh_s = spark_fresh_seconds(checkpoint)
    print(f"spark warm: {warm_s:7.3f} s  rows {spark_rows}, key chars {key_chars}")
    print(f"spark fresh process: {fresh_s:7.3f} s")
    print(f"rows equal: {spark_rows == ours.rows}")
    print(f"ratios: spark warm / ours = {warm_s / ours_s:.1f}x, spark fresh / ours = {fresh_s / ours_s:.1f}x, "
          f"ours / raw lz4 = {ours_s / raw_s:.1f}x")
    return 0 if spark_rows == ours.rows else 1


if __name__ == "__main__":
    sys.exit(main())
