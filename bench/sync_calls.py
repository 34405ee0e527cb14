"""Benchmark P1: a sync of 10 new batches on a long history against the same on a short one.

Usage (from the repository root)::

    .venv/bin/python -m bench.sync_calls [--workdir DIR] [--long 100000] [--short 100] [--repeat 5]

1. Writes two checkpoints with bench/checkpoint_history.py (offsets/N and commits/N copied from
   a PySpark-written fixture): ``--short`` and ``--long`` committed batches, into DIR (a temp dir
   by default), and registers them in a fresh SQLite database in DIR (migrated here; the Django
   settings are the project's, with CKPTWEB_DATA_DIR pointing at DIR).
2. Syncs each once (the first sync is a reconcile: it lists and reads everything; not measured).
3. ``--repeat`` times, for each checkpoint in turn: writes 10 new batches and times one sync
   (a probe). Prints the storage calls of each probe by kind and the best time of each, and the
   ratio long/short (target <= 1.5; the calls must be equal).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.checkpoint_history import read_template, write_batches
from bench.django_env import setup_django


def _register(workdir: Path, name: str, batches: int):
    from dashboards.models import Checkpoint
    from workers.sync import sync_checkpoint

    directory = workdir / "checkpoints" / name
    write_batches(directory, range(batches), read_template())
    checkpoint = Checkpoint.objects.create(name=name, url=str(directory))
    started = time.perf_counter()
    sync_checkpoint(checkpoint.pk)
    print(
        f"{name}: {batches} batches; first sync (a reconcile, not measured below) "
        f"took {time.perf_counter() - started:.2f} s"
    )
    return checkpoint, directory


def _probe_ten(checkpoint, directory: Path) -> tuple[float, tuple[int, ...]]:
    from workers.sync import sync_checkpoint

    checkpoint.refresh_from_db()
    first = checkpoint.latest_batch_id + 1
    write_batches(directory, range(first, first + 10), read_template())
    started = time.perf_counter()
    run = sync_checkpoint(checkpoint.pk)
    elapsed = time.perf_counter() - started
    assert run.new_batches == 10, run.message
    return elapsed, (run.kind, run.list_calls, run.info_calls, run.read_calls, run.bytes_read)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--short", type=int, default=100)
    parser.add_argument("--long", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    return parser.parse_args()


def _best_probes(cases: dict, repeat: int) -> tuple[dict[str, float], dict[str, tuple[int, ...]]]:
    """Each case's best time of ten probes over ``repeat`` tries, and the calls the probes made."""
    best, calls = {}, {}
    for _ in range(repeat):
        for name, (checkpoint, directory) in cases.items():
            elapsed, calls[name] = _probe_ten(checkpoint, directory)
            best[name] = min(best.get(name, elapsed), elapsed)
    return best, calls


def main() -> None:
    args = _arguments()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-sync-calls-"))
    (workdir / "checkpoints").mkdir(parents=True, exist_ok=True)
    setup_django(workdir)
    cases = {"short": _register(workdir, "short", args.short), "long": _register(workdir, "long", args.long)}
    best, calls = _best_probes(cases, args.repeat)
    for name in cases:
        print(
            f"{name}: calls (kind, list, info, read, bytes) {calls[name]}, "
            f"best of {args.repeat}: {best[name] * 1000:.1f} ms"
        )
    print(f"time ratio long/short: {best['long'] / best['short']:.2f}; calls equal: {calls['long'] == calls['short']}")


if __name__ == "__main__":
    main()
