"""Benchmark P2: the first full sync of a long checkpoint against `cat` of the same files.

Usage (from the repository root)::

    .venv/bin/python -m bench.first_sync [--workdir DIR] [--batches 100000] [--repeat 3]

1. Writes a checkpoint of ``--batches`` committed batches with bench/checkpoint_history.py
   (offsets/N and commits/N copied from a PySpark-written fixture) into DIR (a temp dir by default).
2. Reads every file once so that both contenders find them in the page cache.
3. ``--repeat`` times, alternating: `cat` of every file of the checkpoint (find | xargs cat), and a
   first sync of it in a child process (a fresh SQLite database in DIR, a new Checkpoint row each
   time): the child reports its wall time, peak RSS (ru_maxrss) and the peak RSS it had before
   the sync began (Django, the project and the migrated database loaded).
4. Prints the best of each and the ratio sync/cat (target <= 3), and the peak RSS (target <= 300 MB).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.checkpoint_history import read_template, write_batches


def _time_cat(directory: Path) -> float:
    started = time.perf_counter()
    subprocess.run(f"find {directory} -type f -print0 | xargs -0 cat > /dev/null", shell=True, check=True)
    return time.perf_counter() - started


def _time_first_sync(workdir: Path, directory: Path, run: int) -> dict:
    command = [sys.executable, "-m", "bench.first_sync", "--child", str(workdir), str(directory), str(run)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def _child(workdir: Path, directory: Path, run: int) -> None:
    """One first sync in this process; prints one JSON line."""
    from bench.django_env import setup_django

    setup_django(workdir)
    from dashboards.models import Checkpoint

    Checkpoint.objects.filter(url=str(directory)).delete()
    checkpoint = Checkpoint.objects.create(name=f"first-sync-{run}", url=str(directory))
    print(json.dumps(_timed_sync(checkpoint.pk)))


def _timed_sync(checkpoint_pk: int) -> dict:
    """The seconds, memory and storage calls of one sync of the checkpoint."""
    from workers.sync import sync_checkpoint

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    sync = sync_checkpoint(checkpoint_pk)
    elapsed = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": elapsed,
        "peak_rss_kb": peak,
        "rss_before_kb": before,
        "batches": sync.new_batches,
        "list": sync.list_calls,
        "info": sync.info_calls,
        "read": sync.read_calls,
        "status": sync.status,
    }


def _print_peak_memory(syncs: list[dict]) -> None:
    peak = max(figures["peak_rss_kb"] for figures in syncs) / 1024
    before = max(figures["rss_before_kb"] for figures in syncs) / 1024
    print(f"peak RSS of the sync process: {peak:.0f} MB (before the sync: {before:.0f} MB)")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
        return
    args = _arguments()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ckptweb-first-sync-"))
    directory = workdir / "checkpoints" / f"history-{args.batches}"
    if not (directory / "commits" / str(args.batches - 1)).exists():
        write_batches(directory, range(args.batches), read_template())
    files = sum(1 for path in directory.rglob("*") if path.is_file())
    _time_cat(directory)  # warm the page cache for both
    cats, syncs = [], []
    for run in range(args.repeat):
        cats.append(_time_cat(directory))
        syncs.append(_time_first_sync(workdir, directory, run))
    _report(args, files, cats, syncs)


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--batches", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    return parser.parse_args()


def _report(args: argparse.Namespace, files: int, cats: list[float], syncs: list[dict]) -> None:
    """Print the best cat and first sync of the repeats, the sync's storage calls and memory, and their ratio."""
    best_sync = min(syncs, key=lambda figures: figures["seconds"])
    assert best_sync["batches"] == args.batches, best_sync
    print(f"{args.batches} batches, {files} files")
    print(f"cat: best of {args.repeat} {min(cats):.2f} s (all: {', '.join(f'{c:.2f}' for c in cats)})")
    sync_seconds = ", ".join(f"{figures['seconds']:.2f}" for figures in syncs)
    print(f"first sync: best of {args.repeat} {best_sync['seconds']:.2f} s (all: {sync_seconds})")
    print(f"calls of a first sync: list {best_sync['list']}, info {best_sync['info']}, read {best_sync['read']}")
    _print_peak_memory(syncs)
    print(f"ratio first sync / cat: {best_sync['seconds'] / min(cats):.2f} (target <= 3)")


if __name__ == "__main__":
    main()
