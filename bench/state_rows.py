"""Benchmark: rows and bytes of a >= 1M-row HDFS state at its latest version, ours against Spark.

Usage (from the repository root; ~10 minutes on 2 cores the first time, PySpark 4.3.0, Java 17)::

    .venv/bin/python -m bench.state_rows [--workdir DIR] [--rows-per-batch 250000] [--repeat 5]
                                         [--cases "fixed,variable,snapshot + deltas,snapshot only,..."]

1. Builds one state per variant with real PySpark into ``DIR/<variant>`` (a temp dir by default;
   an existing one is reused): ``rate-micro-batch`` rows keyed by strings, 6 batches (10 for
   ``snapshot``) of ``--rows-per-batch`` rows 10 s of event time apart, ``dropDuplicates(key,
   timestamp)`` with a 35 s watermark, 8 shuffle partitions, HDFS provider, lz4. From batch 5 on,
   each batch evicts an old batch's rows: the latest version holds 4-5 batches' rows and the
   deltas the removals.

   * ``fixed``: keys ``user-<n>``; the state key row (string, timestamp) is 40 bytes for every
     n >= 1000 (32 below), so nearly every record of a file has the same sizes;
   * ``variable``: keys ``user-<n>`` plus ``n % 17`` x's: 40, 48 or 56-byte key rows, mixed in
     hash order, so runs of equal sizes are short;
   * ``snapshot``: ``fixed`` over 10 batches with snapshots after 3 deltas, maintenance every
     second and a trigger every 2 s (so maintenance runs between batches), kept running until
     both of its cases exist. It is measured twice: at the newest version every partition loads
     from a snapshot plus deltas (not always the latest: a partition whose latest version has
     just been snapshotted loads the snapshot alone), and at the newest version every partition
     loads from its snapshot alone (maintenance reaches the partitions one after the other, so it
     may write their snapshots at different versions: the newest version common to all when
     there is one, else each partition at its own newest snapshot, which the report lists). A
     reused state without them stops the run, saying which is missing;
   * ``variable-snapshot``: the same with ``variable``'s keys.
2. Measures each case of CASES (a variant at a version) in this one run (best of ``--repeat``
   unless said otherwise):
   * ours: ``staterows.read_state_size`` for every partition, in this process;
   * ours, 2 processes: the same with the partitions split over a pool of 2 processes (started
     and warmed up before timing, as a worker's pool would be), after all single-process timings;
   * decompression only: ``statecodec.decompress_state_file`` of every file of the chains;
   * raw lz4: ``lz4.block.decompress`` of every block payload of the same files (no framing
     checks, no checksums, no joining, no records);
   * Spark warm: ``spark.read.format("statestore")`` count and key-length sum at that version,
     in one session kept for all cases, after one unmeasured run per case;
   * Spark fresh: the same in a new Python + JVM process (start-up included, one run);
   * memory: the RSS of a fresh Python process before it runs ours once, and its peak RSS.
3. Prints the figures and ratios per case; exits 1 if any row count differs from Spark's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from workers.checkpoint.errors import CheckpointError
from workers.checkpoint.lz4block import HEADER
from workers.checkpoint.statecodec import decompress_state_file
from workers.checkpoint.stateinventory import (
    HdfsStateFile,
    files_for_version,
    list_state_store_dirs,
    parse_hdfs_state_files,
)
from workers.checkpoint.staterows import StateSize, read_state_size
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

BATCHES = 6
PARTITIONS = 8
SNAPSHOT_WAIT_SECONDS = 180
FIXED_KEY = "concat('user-', CAST(value AS STRING))"
SPARK_QUERY = "SELECT count(*) AS row_count, sum(octet_length(key.key)) AS key_chars FROM statestore"


@dataclass(frozen=True)
class Variant:
    key_sql: str
    conf: dict[str, str] = field(default_factory=dict)
    # Time between triggers: room for the maintenance thread to write snapshots.
    trigger: str = "0 seconds"
    batches: int = BATCHES
    # Keep triggering (up to SNAPSHOT_WAIT_SECONDS more) until some version is a snapshot in every
    # partition and a later one a snapshot plus deltas in every partition: when maintenance gets
    # to write snapshots depends on timing; build_state fails, saying which is missing, if none comes.
    needs_snapshot: bool = False


VARIABLE_KEY = f"concat({FIXED_KEY}, repeat('x', CAST(value % 17 AS INT)))"
SNAPSHOT_CONF = {
    "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2",
    "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
}
VARIANTS = {
    "fixed": Variant(FIXED_KEY),
    "variable": Variant(VARIABLE_KEY),
    "snapshot": Variant(FIXED_KEY, SNAPSHOT_CONF, trigger="2 seconds", batches=10, needs_snapshot=True),
    "variable-snapshot": Variant(VARIABLE_KEY, SNAPSHOT_CONF, trigger="2 seconds", batches=10, needs_snapshot=True),
}


def build_state(base: Path, variant: Variant, rows_per_batch: int) -> Path:
    """Run the dedup query over ``variant.batches`` rate-micro-batch batches; return the checkpoint."""
    checkpoint = base / "checkpoint"
    if (checkpoint / "commits").is_dir():
        return checkpoint
    from pipelines.queries import build_session, stop_between_batches

    spark = build_session(
        "bench-state-rows",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": str(PARTITIONS),
            "spark.driver.memory": "3g",
            **variant.conf,
        },
    )
    query = _start_dedup_query(spark, checkpoint, variant, rows_per_batch)
    _wait_for_batches(query, checkpoint, variant)
    failure = query.exception()
    stop_between_batches(query, 5)
    spark.stop()
    if failure is not None or _committed(checkpoint) < variant.batches:
        raise RuntimeError(f"{checkpoint}: {_committed(checkpoint)} batches committed; the query failed: {failure}")
    if variant.needs_snapshot and (missing := missing_snapshot_cases(checkpoint)):
        raise RuntimeError(
            f"{'; '.join(missing)}, after {SNAPSHOT_WAIT_SECONDS} s of batches beyond the first {variant.batches}"
        )
    return checkpoint


def _start_dedup_query(spark, checkpoint: Path, variant: Variant, rows_per_batch: int):
    """dropDuplicates with a watermark over a rate-micro-batch source, into a noop sink."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows_per_batch)
        .option("numPartitions", 2)
        .option("startTimestamp", 1_704_067_200_000)
        .option("advanceMillisPerBatch", 10_000)
        .load()
        .select(F.expr(variant.key_sql).alias("key"), "timestamp")
    )
    deduped = events.withWatermark("timestamp", "35 seconds").dropDuplicates(["key", "timestamp"])
    return (
        deduped.writeStream.format("noop")
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime=variant.trigger)
        .start()
    )


def _wait_for_batches(query, checkpoint: Path, variant: Variant) -> None:
    """Until ``variant.batches`` commits, then (for a snapshot variant) its snapshots, a bounded wait."""
    # The source never runs dry: the caller stops after variant.batches commits (between batches if
    # one ends within 5 s). From batch 5 on every batch evicts one old batch's rows, so the state
    # stays at 4-5 batches' rows, and an interrupted batch leaves nothing the latest commit depends on.
    while query.isActive and _committed(checkpoint) < variant.batches:
        time.sleep(0.2)
    deadline = time.monotonic() + SNAPSHOT_WAIT_SECONDS
    while variant.needs_snapshot and query.isActive and missing_snapshot_cases(checkpoint):
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)


def _committed(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


# A version to measure per partition: {partition: version}, the version Spark's statestore reader
# loads for batch version - 1.
Versions = dict[int, int]


def committed_version(checkpoint: Path) -> int:
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()) + 1


def latest_versions(checkpoint: Path) -> Versions:
    """Every partition at the version of the last committed batch."""
    return dict.fromkeys(range(PARTITIONS), committed_version(checkpoint))


def _state_files(checkpoint: Path) -> dict[int, tuple[HdfsStateFile, ...]]:
    """Each partition's state files by version (its snapshots and deltas)."""
    stores = list_state_store_dirs(CheckpointStorage(str(checkpoint)))
    return {store.partition: parse_hdfs_state_files(store.files)[0] for store in stores}


def _loads_snapshot_and_deltas(state_files: tuple[HdfsStateFile, ...], version: int) -> bool:
    try:
        chain = files_for_version(state_files, version)
    except CheckpointError:  # a file the chain needs is missing (or still being written)
        return False
    return chain[0].is_snapshot and len(chain) > 1


def snapshot_and_deltas_versions(checkpoint: Path) -> Versions:
    """Every partition at the newest committed version it loads from a snapshot plus deltas.

    The latest version is not always one: where maintenance has just written a snapshot of it,
    that partition loads the snapshot alone. Raises LookupError when no committed version is
    loaded from a snapshot plus at least one delta in every partition.
    """
    committed, files = committed_version(checkpoint), _state_files(checkpoint)
    for version in range(committed, 0, -1):
        if all(_loads_snapshot_and_deltas(state_files, version) for state_files in files.values()):
            return dict.fromkeys(files, version)
    raise LookupError(
        f"{checkpoint}: no version up to {committed} that every partition loads from a snapshot plus deltas"
    )


def snapshot_only_versions(checkpoint: Path) -> Versions:
    """Every partition at a committed version it loads from a snapshot alone.

    The newest version with a snapshot in every partition when there is one. Maintenance reaches
    the partitions one after the other, so it may write their snapshots at different versions, and
    on some machines never at a common one (in one CI run two of 8 partitions stayed a version off
    for 90 versions): then each partition is measured at its own newest snapshot, and Spark is read
    at each of those versions for its partitions (spark_count). Raises LookupError, with each
    partition's snapshot versions, when a partition has no committed snapshot at all.
    """
    committed, files = committed_version(checkpoint), _state_files(checkpoint)
    snapshots = {
        partition: sorted(f.version for f in state_files if f.is_snapshot and f.version <= committed)
        for partition, state_files in files.items()
    }
    if not snapshots or not all(snapshots.values()):
        raise LookupError(
            f"{checkpoint}: no version up to {committed} with a snapshot in every partition "
            f"(snapshot versions by partition: {snapshots})"
        )
    common = set.intersection(*(set(versions) for versions in snapshots.values()))
    if common:
        return dict.fromkeys(files, max(common))
    return {partition: versions[-1] for partition, versions in snapshots.items()}


def missing_snapshot_cases(checkpoint: Path) -> list[str]:
    """Why the snapshot cases cannot be measured on ``checkpoint`` yet (empty when they can)."""
    reasons = []
    for choose_versions in (snapshot_and_deltas_versions, snapshot_only_versions):
        try:
            choose_versions(checkpoint)
        except LookupError as error:
            reasons.append(str(error))
    return reasons


def partitions_by_version(versions: Versions) -> dict[int, list[int]]:
    grouped: dict[int, list[int]] = {}
    for partition, version in sorted(versions.items()):
        grouped.setdefault(version, []).append(partition)
    return grouped


# label -> (variant, versions to measure)
CASES: dict[str, tuple[str, Callable[[Path], Versions]]] = {
    "fixed": ("fixed", latest_versions),
    "variable": ("variable", latest_versions),
    "snapshot + deltas": ("snapshot", snapshot_and_deltas_versions),
    "snapshot only": ("snapshot", snapshot_only_versions),
    "variable snapshot + deltas": ("variable-snapshot", snapshot_and_deltas_versions),
    "variable snapshot only": ("variable-snapshot", snapshot_only_versions),
}


def chain_files(checkpoint: Path, versions: Versions) -> list[Path]:
    """The files Spark loads for ``versions``, over all partitions."""
    storage = CheckpointStorage(str(checkpoint))
    paths = []
    for store in list_state_store_dirs(storage):
        chain = files_for_version(parse_hdfs_state_files(store.files)[0], versions[store.partition])
        paths.extend(checkpoint / store.path / state_file.name for state_file in chain)
    return paths


def measure_ours(checkpoint: Path, versions: Versions, partitions: tuple[int, ...] | None = None) -> StateSize:
    storage = CheckpointStorage(str(checkpoint))
    total = StateSize(0, 0, 0)
    for store in list_state_store_dirs(storage):
        if partitions is None or store.partition in partitions:
            total = total + read_state_size(storage, store, versions[store.partition], codec="lz4")
    return total


def measure_ours_in_pool(pool: ProcessPoolExecutor, checkpoint: Path, versions: Versions) -> StateSize:
    halves = [tuple(range(PARTITIONS))[i::2] for i in range(2)]
    sizes = pool.map(measure_ours, [checkpoint] * 2, [versions] * 2, halves)
    return sum(sizes, StateSize(0, 0, 0))


def measure_decompression(paths: list[Path]) -> int:
    return sum(len(decompress_state_file(path.read_bytes(), source=path.name, codec="lz4")) for path in paths)


def measure_raw_lz4(paths: list[Path]) -> int:
    """Decompress every LZ4 block payload of ``paths``, trusting the headers."""
    import lz4.block

    produced = 0
    for path in paths:
        data = path.read_bytes()
        view, pos = memoryview(data), 0
        while pos < len(data):
            _, _, compressed, raw, _ = HEADER.unpack_from(data, pos)
            pos += HEADER.size
            if raw:
                produced += len(lz4.block.decompress(view[pos : pos + compressed], uncompressed_size=raw))
            pos += compressed
    return produced


def spark_count(spark, checkpoint: Path, versions: Versions) -> tuple[int, int]:
    """Spark's rows and key characters, each partition at its version: one read per version."""
    rows = key_chars = 0
    for version, partitions in partitions_by_version(versions).items():
        frame = spark.read.format("statestore").option("batchId", version - 1).load(str(checkpoint))
        if len(partitions) < len(versions):
            frame = frame.where(frame.partition_id.isin(partitions))
        frame.createOrReplaceTempView("statestore")
        row = spark.sql(SPARK_QUERY).collect()[0]
        rows, key_chars = rows + row["row_count"], key_chars + (row["key_chars"] or 0)
    return rows, key_chars


def best_of(repeat: int, action: Callable):
    timings, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = action()
        timings.append(time.perf_counter() - start)
    return min(timings), result


def _run_python(code: str) -> list[str]:
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return completed.stdout.strip().splitlines()


def spark_fresh_seconds(checkpoint: Path, versions: Versions) -> float:
    code = (
        "import time; t = time.perf_counter()\n"
        "from pipelines.queries import build_session\n"
        "from bench.state_rows import spark_count\n"
        "from pathlib import Path\n"
        "spark = build_session('bench-fresh', master='local[2]', "
        f"conf={{'spark.sql.shuffle.partitions': '{PARTITIONS}'}})\n"
        f"print(spark_count(spark, Path({str(checkpoint)!r}), {versions!r}))\n"
        "spark.stop(); print(time.perf_counter() - t)\n"
    )
    return float(_run_python(code)[-1])


def ours_peak_memory_mib(checkpoint: Path, versions: Versions) -> tuple[float, float]:
    """Run ours once in a fresh process; return its RSS just before and its peak RSS, in MiB.

    (tracemalloc is no use here: CheckpointStorage's bounded read asks the file for up to
    max_bytes, which Python allocates up front as untouched virtual memory.)
    """
    code = (
        "import os, resource\n"
        "from pathlib import Path\n"
        "from bench.state_rows import measure_ours\n"
        "print(int(open('/proc/self/statm').read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20)\n"
        f"measure_ours(Path({str(checkpoint)!r}), {versions!r})\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)\n"
    )
    before, peak = _run_python(code)[-2:]
    return float(before), float(peak)


def describe_state(paths: list[Path], versions: Versions) -> str:
    kinds = sorted((p.name for p in paths if p.parent.name == "0"), key=lambda name: int(name.split(".")[0]))
    size = sum(p.stat().st_size for p in paths)
    grouped = "; ".join(
        f"version {version}: partitions {partitions}" for version, partitions in partitions_by_version(versions).items()
    )
    return f"{grouped}; partition 0 loads {kinds}; {len(paths)} files, {size / 1e6:.1f} MB compressed"


@dataclass
class Figures:
    checkpoint: Path
    versions: Versions
    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ours: StateSize | None = None
    rows_equal: bool = False


def measure_case(checkpoint: Path, versions: Versions, repeat: int) -> Figures:
    """The single-process measurements of one case."""
    figures, paths = Figures(checkpoint, versions), chain_files(checkpoint, versions)
    figures.notes.append(describe_state(paths, versions))
    figures.seconds["ours"], figures.ours = best_of(repeat, lambda: measure_ours(checkpoint, versions))
    figures.seconds["decompression only"], raw_bytes = best_of(repeat, lambda: measure_decompression(paths))
    figures.seconds["raw lz4"], _ = best_of(repeat, lambda: measure_raw_lz4(paths))
    before, peak = ours_peak_memory_mib(checkpoint, versions)
    figures.notes.append(f"ours: {figures.ours}; {raw_bytes / 1e6:.0f} MB decompressed")
    figures.notes.append(f"a fresh process running ours once: RSS {before:.0f} MiB before, peak {peak:.0f} MiB")
    figures.seconds["spark fresh process"] = spark_fresh_seconds(checkpoint, versions)
    figures.rows_equal = True
    return figures


def add_pooled(cases: dict[str, Figures], repeat: int) -> None:
    """Time ours over a pool of 2 processes, started and warmed up first."""
    with ProcessPoolExecutor(2, mp_context=get_context("spawn"), initializer=_import_library) as pool:
        list(pool.map(time.sleep, [1, 1]))  # both workers up and initialised
        for figures in cases.values():
            checkpoint, versions = figures.checkpoint, figures.versions
            figures.seconds["ours, 2 processes"], pooled = best_of(
                repeat,
                lambda checkpoint=checkpoint, versions=versions: measure_ours_in_pool(pool, checkpoint, versions),
            )
            figures.rows_equal = figures.rows_equal and pooled == figures.ours


def _import_library() -> None:
    import workers.checkpoint.staterows  # noqa: F401


def add_spark_warm(cases: dict[str, Figures], repeat: int) -> None:
    from pipelines.queries import build_session

    spark = build_session("bench-warm", master="local[2]", conf={"spark.sql.shuffle.partitions": str(PARTITIONS)})
    for figures in cases.values():
        _time_spark_warm(spark, figures, repeat)
    spark.stop()


def _time_spark_warm(spark, figures: Figures, repeat: int) -> None:
    """Spark's count of one case in a warm session, best of ``repeat``, checked against ours."""
    checkpoint, versions = figures.checkpoint, figures.versions
    spark_count(spark, checkpoint, versions)  # warm-up: JIT, class loading, file system caches
    figures.seconds["spark warm"], (rows, key_chars) = best_of(
        repeat, lambda checkpoint=checkpoint, versions=versions: spark_count(spark, checkpoint, versions)
    )
    figures.rows_equal = figures.rows_equal and rows == figures.ours.rows
    figures.notes.append(f"Spark: rows {rows}, key chars {key_chars}; rows equal ours: {rows == figures.ours.rows}")


def report(label: str, figures: Figures) -> None:
    seconds = figures.seconds
    print(f"\n== {label}")
    for note in figures.notes:
        print(f"   {note}")
    for name, value in seconds.items():
        print(f"   {name:<22} {value:8.3f} s")
    print(
        f"   ratios: spark warm / ours = {seconds['spark warm'] / seconds['ours']:.1f}x, "
        f"spark fresh / ours = {seconds['spark fresh process'] / seconds['ours']:.1f}x, "
        f"ours / raw lz4 = {seconds['ours'] / seconds['raw lz4']:.1f}x, "
        f"spark warm / ours 2 processes = {seconds['spark warm'] / seconds['ours, 2 processes']:.1f}x, "
        f"ours 2 processes / raw lz4 = {seconds['ours, 2 processes'] / seconds['raw lz4']:.1f}x, "
        f"decompression only / raw lz4 = {seconds['decompression only'] / seconds['raw lz4']:.1f}x"
    )


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--rows-per-batch", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    base = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-bench-"))
    labels = args.cases.split(",")
    checkpoints = _build_variants(base, labels, args.rows_per_batch)
    print(f"load average before measuring: {os.getloadavg()}")
    try:
        versions = {label: CASES[label][1](checkpoints[CASES[label][0]]) for label in labels}
    except LookupError as error:
        print(f"cannot measure this case: {error}", file=sys.stderr)
        return 2
    cases = _measure_cases(checkpoints, versions, args.repeat)
    for label, figures in cases.items():
        report(label, figures)
    print(f"\nload average after: {os.getloadavg()}")
    return 0 if all(figures.rows_equal for figures in cases.values()) else 1


def _build_variants(base: Path, labels: list[str], rows_per_batch: int) -> dict[str, Path]:
    """The checkpoint of each variant the cases ``labels`` read, built once under ``base``."""
    variants = dict.fromkeys(CASES[label][0] for label in labels)
    return {variant: build_state(base / variant, VARIANTS[variant], rows_per_batch) for variant in variants}


def _measure_cases(checkpoints: dict, versions: dict, repeat: int) -> dict[str, Figures]:
    """Each case (label -> its versions) measured our ways, in two processes and by a warm Spark."""
    cases = {label: measure_case(checkpoints[CASES[label][0]], versions[label], repeat) for label in versions}
    add_pooled(cases, repeat)
    add_spark_warm(cases, repeat)
    return cases


if __name__ == "__main__":
    sys.exit(main())
