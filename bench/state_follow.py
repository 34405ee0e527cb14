"""Benchmark: bringing the rows of a >= 1M-row HDFS state up to date after one new delta, against a cold read.

Usage (from the repository root; a few minutes on 2 cores the first time, PySpark 4.3.0, Java 17)::

    .venv/bin/python -m bench.state_follow [--workdir DIR] [--rows-per-batch 250000] [--repeat 3]

1. Builds (or reuses, in ``DIR/variable``) bench.state_rows' ``variable`` state with real PySpark:
   string keys of 40 to 56-byte key rows, 6 batches of ``--rows-per-batch`` rows, from batch 5
   on each batch's delta removes an old batch's rows; 8 partitions, HDFS provider, lz4.
2. For the latest version V, summed over the partitions (best of ``--repeat``):
   * follow: what a sync does per partition: read the kept key set of V - 1 from its file,
     read V's delta, apply it (statekeys.follow_delta), write the key set back (temporary file
     and rename);
   * cold read, key set: statefollow.read_state_keys at V (the snapshot and every delta Spark
     loads), what the follow falls back to when no key set is kept;
   * cold read, count only: staterows.read_state_size at V (what the full pass runs);
   * of the follow, the key-set files alone read, checked and written back: its floor, for a
     delta of any size (this query's deltas are large: each puts one batch and removes another);
   and checks that the followed rows equal the cold read's (exits 1 otherwise).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.state_rows import VARIANTS, build_state, committed_version
from workers.checkpoint.statefollow import read_state_keys
from workers.checkpoint.stateinventory import list_state_store_dirs
from workers.checkpoint.statekeys import follow_delta, parse_state_keys
from workers.checkpoint.staterows import read_state_size
from workers.checkpoint.statesummary import StateConf
from workers.checkpoint.storage.checkpointstorage import CheckpointStorage

CONF = StateConf("lz4", False)


def best_of(repeat: int, run) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def follow_all(storage: CheckpointStorage, stores, version: int, keys_dir: Path) -> int:
    rows = 0
    for store in stores:
        path = keys_dir / f"{store.partition}.keys"
        previous = parse_state_keys(path.read_bytes(), source=str(path))
        source = f"{store.path}/{version}.delta"
        keys = follow_delta(
            previous, storage.read_bytes(source, max_bytes=None), version=version, source=source, codec=CONF.codec
        )
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(keys.to_bytes())
        temporary.replace(keys_dir / f"{store.partition}.next")
        rows += keys.rows
    return rows


def key_sets_round_trip(stores, keys_dir: Path) -> None:
    for store in stores:
        path = keys_dir / f"{store.partition}.keys"
        keys = parse_state_keys(path.read_bytes(), source=str(path))
        temporary = path.with_suffix(".tmp")
        temporary.write_bytes(keys.to_bytes())
        temporary.replace(keys_dir / f"{store.partition}.next")


def keep_previous_key_sets(storage: CheckpointStorage, stores, version: int, keys_dir: Path) -> None:
    """Write the key sets a previous sync kept, at ``version`` - 1 (not timed)."""
    keys_dir.mkdir(exist_ok=True)
    for store in stores:
        (keys_dir / f"{store.partition}.keys").write_bytes(
            read_state_keys(storage, store, version - 1, conf=CONF).to_bytes()
        )


def time_the_reads(storage: CheckpointStorage, stores, version: int, keys_dir: Path, repeat: int) -> dict:
    """Best-of-``repeat`` seconds and rows of each way to read version ``version``'s keys, by name."""
    return {
        "follow": best_of(repeat, lambda: follow_all(storage, stores, version, keys_dir)),
        "floor": best_of(repeat, lambda: key_sets_round_trip(stores, keys_dir)),
        "cold": best_of(repeat, lambda: sum(read_state_keys(storage, s, version, conf=CONF).rows for s in stores)),
        "count": best_of(repeat, lambda: sum(read_state_size(storage, s, version).rows for s in stores)),
    }


def report(timings: dict, version: int, partitions: int, delta_bytes: int) -> int:
    """Print the timings against the follow's; 1 when the three ways disagree on the rows."""
    (follow_s, followed), (floor_s, _), (cold_s, cold), (count_s, counted) = (
        timings[name] for name in ("follow", "floor", "cold", "count")
    )
    print(f"state version {version}: {cold:,} rows in {partitions} partitions; the new deltas: {delta_bytes:,} bytes")
    print(f"follow one delta (key sets from and to disk): {follow_s:8.3f} s")
    print(f"  of which key sets read and written alone:   {floor_s:8.3f} s  (the floor, whatever the delta's size)")
    print(f"cold read, key set:                           {cold_s:8.3f} s  ({cold_s / follow_s:.1f}x the follow)")
    print(f"cold read, count only (the full pass):        {count_s:8.3f} s  ({count_s / follow_s:.1f}x the follow)")
    if not followed == cold == counted:
        print(f"MISMATCH: followed {followed}, cold {cold}, counted {counted}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--rows-per-batch", type=int, default=250_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-state-follow-"))
    checkpoint = build_state(workdir / "variable", VARIANTS["variable"], args.rows_per_batch)
    version = committed_version(checkpoint)
    storage = CheckpointStorage(str(checkpoint))
    stores = list_state_store_dirs(storage)
    keys_dir = workdir / "statekeys"
    keep_previous_key_sets(storage, stores, version, keys_dir)
    timings = time_the_reads(storage, stores, version, keys_dir, args.repeat)
    delta_bytes = sum((checkpoint / s.path / f"{version}.delta").stat().st_size for s in stores)
    return report(timings, version, len(stores), delta_bytes)


if __name__ == "__main__":
    sys.exit(main())
